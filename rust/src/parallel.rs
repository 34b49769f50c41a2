//! How many threads a batched kernel uses: one below a size where spawning costs more than
//! it saves, else every core (the machines this runs on are small; scoped threads suffice).

/// Work items (outputs) below which a kernel stays on the calling thread.
const MIN_ITEMS_PER_THREAD: usize = 1 << 16;

pub fn threads_for(items: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (items / MIN_ITEMS_PER_THREAD).clamp(1, cores)
}
