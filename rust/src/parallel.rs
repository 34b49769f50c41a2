//! How many threads a batched kernel uses: one below a size where spawning costs more than
//! it saves, else every core (the machines this runs on are small; scoped threads suffice).

/// Work items (outputs) below which a kernel stays on the calling thread.
const MIN_ITEMS_PER_THREAD: usize = 1 << 16;

/// Most threads one batch call spawns, whatever the caller asks for: these kernels are
/// bound by the cores, and a spawn that fails (too many threads, or their stacks beyond an
/// address-space limit) would panic.
pub const MAX_THREADS: usize = 256;

pub fn threads_for(items: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (items / MIN_ITEMS_PER_THREAD).clamp(1, cores)
}

/// `f(part)` for every part, the last on the calling thread and each other on a scoped thread
/// of its own: a call of one part (a small batch) spawns nothing, where a spawn costs more than
/// its work (`benches/bench_small_calls.py`).
pub fn for_each_part<P: Send>(parts: impl Iterator<Item = P>, f: impl Fn(P) + Sync) {
    let f = &f;
    let mut parts = parts.peekable();
    std::thread::scope(|s| {
        while let Some(p) = parts.next() {
            if parts.peek().is_none() {
                f(p);
            } else {
                s.spawn(move || f(p));
            }
        }
    });
}

/// `f(i)` for i in 0..n, in order, split into contiguous chunks over `threads_for(work)`
/// threads (`work`: the total items the calls touch).
pub fn map_range<T: Send>(n: usize, work: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let threads = threads_for(work);
    if threads == 1 || n < 2 {
        return (0..n).map(f).collect();
    }
    let chunk = n.div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|start| {
                s.spawn(move || (start..(start + chunk).min(n)).map(f).collect::<Vec<T>>())
            })
            .collect();
        let mut all = Vec::with_capacity(n);
        for p in parts {
            all.extend(p.join().expect("worker thread panicked"));
        }
        all
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::thread::{current, ThreadId};

    fn threads_of(parts: usize) -> Vec<(usize, ThreadId)> {
        let seen = Mutex::new(Vec::new());
        for_each_part(0..parts, |p| seen.lock().unwrap().push((p, current().id())));
        let mut seen = seen.into_inner().unwrap();
        seen.sort_by_key(|&(p, _)| p);
        seen
    }

    #[test]
    fn one_part_runs_on_the_calling_thread() {
        assert_eq!(threads_of(1), vec![(0, current().id())]);
        assert!(threads_of(0).is_empty());
    }

    #[test]
    fn each_part_runs_once_the_last_on_the_calling_thread() {
        let seen = threads_of(4);
        assert_eq!(
            seen.iter().map(|&(p, _)| p).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert_eq!(seen[3].1, current().id());
        assert!(seen[..3].iter().all(|&(_, t)| t != current().id()));
    }
}
