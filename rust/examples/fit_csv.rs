//! Test harness: fit the power model to a gpmTOOL CSV and print JSON (fit time, coefficients,
//! voltages, training MAPE; optionally the MAPE on a second file and grouped K-fold CV).
//!
//! cargo run --release --example fit_csv -- TRAIN.csv [--variant per-config|per-domain|curve]
//!     [--relative] [--ridge X] [--max-iter N] [--dev DEV.csv] [--cv K] [--repeat N]
//!     [--drop-negative] [--drop-zero-columns]
//!
//! --drop-negative excludes benchmarks with a utilization below -1e-6 (k40c's garbage rows);
//! --drop-zero-columns removes components that are zero in every row. Both are reported.
//! CV groups are benchmark identities (name + utilization vector), fold = group index mod K in
//! order of first appearance.

use gpudvfs_core::power::{fit, FitOptions, FittedPower, PowerData, Variant};
use std::time::Instant;

struct Table {
    ref_mhz: [f64; 2],
    sizes: Vec<usize>,
    names: Vec<String>,
    group: Vec<usize>,
    watts: Vec<f64>,
    core: Vec<f64>,
    mem: Vec<f64>,
    util: Vec<f64>,
}

fn read(path: &str) -> Result<Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let nums = |i: usize| -> Result<Vec<f64>, String> {
        lines[i]
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|e| format!("{path}:{}: {e}", i + 1))
            })
            .collect()
    };
    let r = nums(1)?;
    let sizes: Vec<usize> = nums(2)?.iter().map(|v| *v as usize).collect();
    let names: Vec<String> = lines[3].split(',').map(|s| s.trim().to_string()).collect();
    let nc: usize = sizes.iter().sum();
    let mut t = Table {
        ref_mhz: [r[0], r[1]],
        sizes,
        names,
        group: vec![],
        watts: vec![],
        core: vec![],
        mem: vec![],
        util: vec![],
    };
    let mut keys: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate().skip(4) {
        let mut f: Vec<&str> = line.split(',').map(|s| s.trim()).collect();
        // Names are optional and may look numeric ("1"): the field count decides.
        let name = if f.len() == 4 + nc {
            f.remove(0).to_string()
        } else {
            String::new()
        };
        if f.len() != 3 + nc {
            return Err(format!(
                "{path}:{}: {} values, expected {}",
                i + 1,
                f.len(),
                3 + nc
            ));
        }
        let v: Vec<f64> = f
            .iter()
            .map(|s| {
                s.parse::<f64>()
                    .map_err(|e| format!("{path}:{}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        let key = format!("{name}|{}", f[3..].join(","));
        let g = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
            keys.push(key);
            keys.len() - 1
        });
        t.group.push(g);
        t.watts.push(v[0]);
        t.core.push(v[1]);
        t.mem.push(v[2]);
        t.util.extend_from_slice(&v[3..]);
    }
    Ok(t)
}

fn nc(t: &Table) -> usize {
    t.sizes.iter().sum()
}

fn subset(t: &Table, keep: &[bool]) -> Table {
    let n = nc(t);
    let mut s = Table {
        ref_mhz: t.ref_mhz,
        sizes: t.sizes.clone(),
        names: t.names.clone(),
        group: vec![],
        watts: vec![],
        core: vec![],
        mem: vec![],
        util: vec![],
    };
    for r in 0..t.watts.len() {
        if keep[r] {
            s.group.push(t.group[r]);
            s.watts.push(t.watts[r]);
            s.core.push(t.core[r]);
            s.mem.push(t.mem[r]);
            s.util.extend_from_slice(&t.util[r * n..(r + 1) * n]);
        }
    }
    s
}

fn drop_columns(t: &mut Table, drop: &[usize]) {
    let n = nc(t);
    let keep: Vec<usize> = (0..n).filter(|c| !drop.contains(c)).collect();
    let rows = t.watts.len();
    t.util = (0..rows)
        .flat_map(|r| keep.iter().map(move |&c| (r, c)))
        .map(|(r, c)| t.util[r * n + c])
        .collect();
    let mut start = 0;
    for s in t.sizes.iter_mut() {
        let end = start + *s;
        *s -= drop.iter().filter(|&&c| c >= start && c < end).count();
        start = end;
    }
    t.names = keep.iter().map(|&c| t.names[c].clone()).collect();
}

fn data(t: &Table) -> PowerData<'_> {
    PowerData {
        watts: &t.watts,
        core_mhz: &t.core,
        mem_mhz: &t.mem,
        util: &t.util,
        n_comp: nc(t),
        domain_sizes: &t.sizes,
        ref_core_mhz: t.ref_mhz[0],
        ref_mem_mhz: t.ref_mhz[1],
    }
}

fn mape(m: &FittedPower, t: &Table) -> Result<f64, String> {
    let p = m
        .predict(&t.util, &t.core, &t.mem)
        .map_err(|e| e.to_string())?;
    Ok(100.0
        * p.iter()
            .zip(&t.watts)
            .map(|(a, b)| ((a - b) / b).abs())
            .sum::<f64>()
        / p.len() as f64)
}

fn arr(xs: &[f64]) -> String {
    format!(
        "[{}]",
        xs.iter()
            .map(|v| if v.is_finite() {
                format!("{v:.6}")
            } else {
                "null".into()
            })
            .collect::<Vec<_>>()
            .join(",")
    )
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = FitOptions::default();
    let (mut dev, mut cv, mut repeat, mut drop_neg, mut drop_zero) =
        (None, 0usize, 1usize, false, false);
    let mut train = None;
    let mut i = 0;
    while i < args.len() {
        let next = |i: usize| {
            args.get(i + 1)
                .cloned()
                .ok_or(format!("{} needs a value", args[i]))
        };
        match args[i].as_str() {
            "--variant" => {
                opts.variant = match next(i)?.as_str() {
                    "per-config" => Variant::PerConfig,
                    "per-domain" => Variant::PerDomain,
                    "curve" => Variant::Curve,
                    v => return Err(format!("unknown variant {v}")),
                };
                i += 1;
            }
            "--relative" => opts.relative_weighting = true,
            "--absolute" => opts.relative_weighting = false,
            "--ridge" => {
                opts.ridge = next(i)?.parse().map_err(|e| format!("--ridge: {e}"))?;
                i += 1;
            }
            "--max-iter" => {
                opts.max_iter = next(i)?.parse().map_err(|e| format!("--max-iter: {e}"))?;
                i += 1;
            }
            "--vmax" => {
                opts.v_max = next(i)?.parse().map_err(|e| format!("--vmax: {e}"))?;
                i += 1;
            }
            "--dev" => {
                dev = Some(next(i)?);
                i += 1;
            }
            "--cv" => {
                cv = next(i)?.parse().map_err(|e| format!("--cv: {e}"))?;
                i += 1;
            }
            "--repeat" => {
                repeat = next(i)?.parse().map_err(|e| format!("--repeat: {e}"))?;
                i += 1;
            }
            "--drop-negative" => drop_neg = true,
            "--drop-zero-columns" => drop_zero = true,
            a if train.is_none() && !a.starts_with("--") => train = Some(a.to_string()),
            a => return Err(format!("unexpected argument {a}")),
        }
        i += 1;
    }
    let train = train.ok_or("usage: fit_csv TRAIN.csv [options]")?;
    let mut t = read(&train)?;
    let mut dropped_rows = 0;
    if drop_neg {
        let n = nc(&t);
        let bad_groups: Vec<usize> = (0..t.watts.len())
            .filter(|&r| t.util[r * n..(r + 1) * n].iter().any(|u| *u < -1e-6))
            .map(|r| t.group[r])
            .collect();
        let keep: Vec<bool> = t.group.iter().map(|g| !bad_groups.contains(g)).collect();
        dropped_rows = keep.iter().filter(|k| !**k).count();
        t = subset(&t, &keep);
    }
    let mut dropped_cols: Vec<String> = Vec::new();
    if drop_zero {
        let n = nc(&t);
        let idx: Vec<usize> = (0..n)
            .filter(|&c| (0..t.watts.len()).all(|r| t.util[r * n + c].abs() <= 1e-9))
            .collect();
        dropped_cols = idx.iter().map(|&c| t.names[c].clone()).collect();
        drop_columns(&mut t, &idx);
    }
    let mut best = f64::INFINITY;
    let mut model = None;
    for _ in 0..repeat.max(1) {
        let t0 = Instant::now();
        let m = fit(&data(&t), &opts).map_err(|e| e.to_string())?;
        best = best.min(t0.elapsed().as_secs_f64());
        model = Some(m);
    }
    let m = model.expect("fitted");
    let mut out = vec![
        format!("\"file\":\"{train}\""),
        format!("\"options\":\"{opts:?}\""),
        format!("\"rows\":{}", t.watts.len()),
        format!("\"dropped_rows\":{dropped_rows}"),
        format!("\"dropped_columns\":{dropped_cols:?}"),
        format!("\"fit_seconds_best_of_{repeat}\":{best:.5}"),
        format!("\"iterations\":{}", m.iterations),
        format!("\"converged\":{}", m.converged),
        format!("\"sse\":{:.4}", m.sse),
        format!("\"objective\":{:.8}", m.objective),
        format!("\"train_mape\":{:.4}", m.train_mape),
        format!("\"static_coef\":{}", arr(&m.coef.static_coef)),
        format!("\"idle_coef\":{}", arr(&m.coef.idle_coef)),
        format!("\"weights\":{}", arr(&m.coef.weights)),
        format!("\"component_names\":{:?}", t.names),
        format!(
            "\"configs\":{}",
            arr(&m
                .configs
                .iter()
                .flat_map(|c| [c.0, c.1])
                .collect::<Vec<_>>())
        ),
        format!("\"voltages\":{}", arr(&m.voltages)),
        format!("\"on_bound\":{}", m.on_bound.iter().filter(|b| **b).count()),
        format!("\"notes\":{:?}", m.notes),
    ];
    if let Some(c) = &m.curves {
        out.push(format!(
            "\"curves\":{{\"break_mhz\":{},\"slope_per_norm_clock\":{}}}",
            arr(&[
                c[0].break_norm * m.ref_mhz[0],
                c[1].break_norm * m.ref_mhz[1]
            ]),
            arr(&[c[0].slope, c[1].slope])
        ));
    }
    if let Some(dev) = dev {
        let mut d = read(&dev)?;
        if drop_zero && !dropped_cols.is_empty() {
            let idx: Vec<usize> = dropped_cols
                .iter()
                .filter_map(|nm| d.names.iter().position(|x| x == nm))
                .collect();
            drop_columns(&mut d, &idx);
        }
        out.push(format!(
            "\"dev_file\":\"{dev}\",\"dev_mape\":{:.4}",
            mape(&m, &d)?
        ));
    }
    if cv > 1 {
        let mut ape_sum = 0.0;
        let mut count = 0usize;
        let mut fold_mapes = Vec::new();
        let mut iters = Vec::new();
        for k in 0..cv {
            let tr = subset(&t, &t.group.iter().map(|g| g % cv != k).collect::<Vec<_>>());
            let te = subset(&t, &t.group.iter().map(|g| g % cv == k).collect::<Vec<_>>());
            if te.watts.is_empty() {
                continue;
            }
            let mk = fit(&data(&tr), &opts).map_err(|e| format!("fold {k}: {e}"))?;
            iters.push(mk.iterations as f64);
            let e = mape(&mk, &te)?;
            fold_mapes.push(e);
            ape_sum += e * te.watts.len() as f64;
            count += te.watts.len();
        }
        out.push(format!(
            "\"cv_folds\":{cv},\"cv_mape\":{:.4},\"cv_fold_mapes\":{},\"cv_iterations\":{}",
            ape_sum / count as f64,
            arr(&fold_mapes),
            arr(&iters)
        ));
    }
    println!("{{{}}}", out.join(","));
    Ok(())
}
