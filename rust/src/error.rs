//! The one error type of the core. The bindings turn it into a Python `ValueError` (an
//! allocation that fails, `Memory`, into a `MemoryError`); nothing in the core panics or
//! aborts on bad input.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum CoreError {
    /// Arrays whose shapes do not fit together.
    Shape(String),
    /// A value outside what the model accepts (NaN, infinity, negative, out of range).
    Value(String),
    /// A buffer of a size the input asks for could not be allocated.
    Memory(String),
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::Shape(m) => write!(f, "shape mismatch: {m}"),
            CoreError::Value(m) => write!(f, "invalid value: {m}"),
            CoreError::Memory(m) => write!(f, "out of memory: {m}"),
        }
    }
}

impl std::error::Error for CoreError {}

pub type CoreResult<T> = Result<T, CoreError>;
