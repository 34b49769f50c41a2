//! gpudvfs core: the numerical hot paths of the GPU DVFS models. Pure Rust; the Python
//! bindings live in `bindings` behind the `python` feature so `cargo test` needs no Python.

mod alloc;
pub mod budget;
pub mod csv_columns;
pub mod error;
pub mod govern;
pub mod online;
pub mod parallel;
pub mod power;
pub mod time;

#[cfg(feature = "python")]
mod bindings;

#[cfg(test)]
mod test_util;
