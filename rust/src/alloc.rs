//! Buffers whose size comes from the input (streams x features, workloads x configurations,
//! kernels x clock pairs) are allocated here, fallibly: `vec![x; n]` aborts the process when
//! the allocation fails, which from Python would kill the interpreter. A size whose bytes
//! overflow is a `Value` error ("too large"); an allocation the system refuses is a `Memory`
//! error naming the bytes.

use crate::error::{CoreError, CoreResult};

/// The product of `dims`, or a `Value` error naming `what` when it overflows.
pub(crate) fn product(dims: &[usize], what: &str) -> CoreResult<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| CoreError::Value(format!("{what}: {} is too large", shape(dims))))
}

fn shape(dims: &[usize]) -> String {
    dims.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(" x ")
}

/// A vector of `len` copies of `value`, or an error instead of an abort: `Value` when `len`
/// elements of `T` would pass `isize::MAX` bytes (no allocation can hold them), `Memory` when
/// the allocator refuses. `what` names the buffer in the message.
pub(crate) fn filled<T: Clone>(len: usize, value: T, what: &str) -> CoreResult<Vec<T>> {
    // The allocation is tried and given back, then made by `vec!`: for zeros that takes
    // pages from the system untouched (calloc), to be faulted in by the threads that write
    // them, where filling a reserved vector here would touch every page on this thread
    // first, which makes large grids markedly slower. `vec!` gets what the try got unless
    // another thread takes that much memory in the moment between them.
    let probe = reserved::<T>(len, what)?;
    // An allocation nothing uses may be optimised away, its success assumed: the probe goes
    // through `black_box`, which the optimiser cannot see into.
    drop(std::hint::black_box(probe));
    Ok(vec![value; len])
}

/// A copy of `xs`, allocated fallibly as `filled` is.
pub(crate) fn copied<T: Clone>(xs: &[T], what: &str) -> CoreResult<Vec<T>> {
    let mut v = reserved(xs.len(), what)?;
    v.extend_from_slice(xs);
    Ok(v)
}

/// An empty vector with room for exactly `len` elements.
pub(crate) fn reserved<T>(len: usize, what: &str) -> CoreResult<Vec<T>> {
    let elem = std::mem::size_of::<T>().max(1);
    let bytes = len
        .checked_mul(elem)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            CoreError::Value(format!(
                "{what}: {len} values of {elem} bytes are too large to allocate"
            ))
        })?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        CoreError::Memory(format!(
            "cannot allocate {bytes} bytes ({:.1} GiB) for {what}",
            bytes as f64 / (1u64 << 30) as f64
        ))
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflowing_sizes_are_value_errors() {
        assert_eq!(product(&[3, 4, 5], "t").unwrap(), 60);
        assert_eq!(product(&[0, usize::MAX], "t").unwrap(), 0);
        match product(&[1 << 40, 1 << 40], "grid") {
            Err(CoreError::Value(m)) => assert!(m.contains("1099511627776 x 1099511627776"), "{m}"),
            other => panic!("{other:?}"),
        }
        // Elements that fit in usize but whose bytes do not.
        assert!(matches!(
            filled(usize::MAX / 4, 0.0f64, "t"),
            Err(CoreError::Value(_))
        ));
        assert!(matches!(
            filled(isize::MAX as usize / 8 + 1, 0.0f64, "t"),
            Err(CoreError::Value(_))
        ));
    }

    /// 2^60 bytes pass no allocator (the address space is at most 2^57 bytes): a `Memory`
    /// error, not the abort of `vec![0.0; n]`.
    #[test]
    fn refused_allocation_is_a_memory_error() {
        match filled(1usize << 57, 0.0f64, "the test buffer") {
            Err(CoreError::Memory(m)) => {
                assert!(m.contains("1152921504606846976 bytes"), "{m}");
                assert!(m.contains("the test buffer"), "{m}");
            }
            other => panic!("{:?}", other.map(|v| v.len())),
        }
        assert_eq!(filled(3, 7u8, "t").unwrap(), vec![7, 7, 7]);
        assert!(filled(0, 1.0f64, "t").unwrap().is_empty());
    }
}
