//! The options of one group worth taking: its Pareto front (no other option is as cheap and
//! as good), which repair searches, and the front's lower convex hull, which the LP
//! relaxation uses: from the cheapest option (the least value among the cheapest) to the
//! option of least value, each step trading watts for value at a falling rate.

use super::Instance;
use crate::error::CoreResult;

#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub option: usize,
    pub cost: f64,
    pub value: f64,
}

/// Cost buckets of the pre-filter: enough that few options survive it (fewer buckets leave
/// more options to sort and scan), few enough that their arrays stay in L1.
const BUCKETS: usize = 512;
/// The bucket of an option the pre-filter drops outright.
const NONE: u16 = BUCKETS as u16;

/// Both by rising cost and falling value.
pub struct Frontier {
    pub front: Vec<Point>,
    /// Convex: the value saved per watt falls from one step to the next.
    pub hull: Vec<Point>,
}

/// Group i's frontier; the row's numbers are checked on the way.
pub fn frontier(inst: &Instance, i: usize) -> CoreResult<Frontier> {
    let mut pts = pareto_candidates(inst, i)?;
    pts.sort_unstable_by(|a, b| a.cost.total_cmp(&b.cost).then(a.value.total_cmp(&b.value)));
    let mut front: Vec<Point> = Vec::with_capacity(pts.len());
    let mut hull: Vec<Point> = Vec::with_capacity(pts.len());
    for p in pts {
        // Dominated: no cheaper than the last kept point and no better.
        if front.last().is_some_and(|l| p.value >= l.value) {
            continue;
        }
        front.push(p);
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
    Ok(Frontier { front, hull })
}

/// The options not shown dominated by three linear scans, so that only a few are sorted:
/// options dearer than the least-value one, or worse than the cheapest one, go; so does an
/// option whose value some option in a cheaper cost bucket matches.
fn pareto_candidates(inst: &Instance, i: usize) -> CoreResult<Vec<Point>> {
    let scan = inst.scan_row(i)?;
    let (cost, value) = inst.row(i);
    let (lo_cost, lo_value, hi_cost) = (scan.cheapest.0, scan.cheapest.1, scan.best.1);
    let point = |j: usize| Point {
        option: j,
        cost: cost[j],
        value: value[j],
    };
    let width = (hi_cost - lo_cost) / BUCKETS as f64;
    if width <= 0.0 {
        let j = (0..cost.len())
            .find(|&j| (cost[j], value[j]) == scan.cheapest)
            .expect("the cheapest option is in its row");
        return Ok(vec![point(j)]);
    }
    let per_watt = 1.0 / width;
    // A NaN value (a forbidden option) fails `v <= lo_value`: it gets no bucket.
    let mut buckets = vec![NONE; cost.len()];
    let mut least = [f64::INFINITY; BUCKETS];
    for ((&c, &v), slot) in cost.iter().zip(value).zip(&mut buckets) {
        if c <= hi_cost && v <= lo_value {
            let b = (((c - lo_cost) * per_watt) as usize).min(BUCKETS - 1);
            least[b] = least[b].min(v);
            *slot = b as u16;
        }
    }
    // before[b]: the least value in the buckets below b (all strictly cheaper).
    let mut before = [f64::INFINITY; BUCKETS + 1];
    for b in 1..BUCKETS {
        before[b] = before[b - 1].min(least[b - 1]);
    }
    // NONE indexes the last entry, which no value is below.
    before[NONE as usize] = f64::NEG_INFINITY;
    Ok(buckets
        .iter()
        .enumerate()
        .filter(|&(j, &b)| value[j] < before[b as usize])
        .map(|(j, _)| point(j))
        .collect())
}
