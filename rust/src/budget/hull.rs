//! The options of one group that the LP relaxation can use: the lower convex hull of its
//! (cost, value) points, from the cheapest option (the least value among the cheapest) to
//! the option of least value, each step trading watts for value at a falling rate.

use super::Instance;

#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub option: usize,
    pub cost: f64,
    pub value: f64,
}

/// Cost buckets of the pre-filter: enough that few options survive it, few enough to scan.
const BUCKETS: usize = 32;

/// Hull points of group i, by rising cost and falling value, convex (the value saved per
/// watt falls from one step to the next).
pub fn lower_hull(inst: &Instance, i: usize) -> Vec<Point> {
    let mut pts = pareto_candidates(inst, i);
    pts.sort_unstable_by(|a, b| a.cost.total_cmp(&b.cost).then(a.value.total_cmp(&b.value)));
    let mut hull: Vec<Point> = Vec::with_capacity(pts.len());
    for p in pts {
        // Dominated: no cheaper than the last kept point and no better.
        if hull.last().is_some_and(|l| p.value >= l.value) {
            continue;
        }
        while hull.len() >= 2 {
            let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
            // b lies on or above the segment a-p: it saves less per watt than going straight on.
            if (b.value - a.value) * (p.cost - a.cost) >= (p.value - a.value) * (b.cost - a.cost) {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(p);
    }
    hull
}

/// The options not shown dominated by three linear scans, so that only a few are sorted:
/// options dearer than the least-value one, or worse than the cheapest one, go; so does an
/// option whose value some option in a cheaper cost bucket matches.
fn pareto_candidates(inst: &Instance, i: usize) -> Vec<Point> {
    let (mut cheapest, mut best) = (None::<Point>, None::<Point>);
    for j in inst.options(i) {
        let p = Point {
            option: j,
            cost: inst.cost(i, j),
            value: inst.value(i, j),
        };
        if cheapest.is_none_or(|c| (p.cost, p.value) < (c.cost, c.value)) {
            cheapest = Some(p);
        }
        if best.is_none_or(|b| (p.value, p.cost) < (b.value, b.cost)) {
            best = Some(p);
        }
    }
    let (Some(lo), Some(hi)) = (cheapest, best) else {
        return Vec::new();
    };
    let width = (hi.cost - lo.cost) / BUCKETS as f64;
    if width <= 0.0 {
        return vec![lo];
    }
    let bucket = |c: f64| (((c - lo.cost) / width) as usize).min(BUCKETS - 1);
    let keep = |c: f64, v: f64| c <= hi.cost && v <= lo.value;
    let mut least = [f64::INFINITY; BUCKETS];
    for j in inst.options(i) {
        let (c, v) = (inst.cost(i, j), inst.value(i, j));
        if keep(c, v) {
            let b = bucket(c);
            least[b] = least[b].min(v);
        }
    }
    // before[b]: the least value in the buckets below b (all strictly cheaper).
    let mut before = [f64::INFINITY; BUCKETS];
    for b in 1..BUCKETS {
        before[b] = before[b - 1].min(least[b - 1]);
    }
    inst.options(i)
        .filter_map(|j| {
            let (c, v) = (inst.cost(i, j), inst.value(i, j));
            (keep(c, v) && v < before[bucket(c)]).then_some(Point {
                option: j,
                cost: c,
                value: v,
            })
        })
        .collect()
}
