//! Online time predictor of Gupta et al. (Section 4): covariance-form recursive least
//! squares, one estimator (`rls`) or many independent streams in flat arrays (`bank`).
//! Both share one update kernel (`kernel`) so they cannot drift apart.

pub mod bank;
mod kernel;
pub mod rls;

pub use bank::{BankState, BankUpdate, RlsBank};
pub use kernel::{Forgetting, RlsConfig};
pub use rls::{Rls, RlsState};
