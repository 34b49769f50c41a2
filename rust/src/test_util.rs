//! Helpers shared by the unit tests.

/// A uniform draw in [0, 1) from a 64-bit LCG: reproducible test data without a crate.
pub fn uniform(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*state >> 11) as f64) / ((1u64 << 53) as f64)
}
