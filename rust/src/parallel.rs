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
