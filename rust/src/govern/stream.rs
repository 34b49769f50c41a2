//! What a phase knows of one quantity (log time, or log watts) at every pair: the offline
//! prediction, an RLS correction linear in the pair's features, the mean of each pair's own
//! measurements, and per pair the residual its most correlated measured pair explains.

use crate::error::CoreResult;
use crate::online::{Rls, RlsConfig};

/// A pair's features: 1, log fc/fc_default, log fm/fm_default.
pub type Features = [f64; 3];

#[derive(Debug, Clone)]
pub struct Stream {
    /// The offline prediction (log).
    prior: Vec<f64>,
    /// log(measured / prior) against the features.
    rls: Rls,
    /// Measurements per pair and their mean (where n > 0).
    pub n: Vec<u32>,
    measured: Vec<f64>,
    /// Per pair, its most correlated measured pair (0 while `corr` is 0), that correlation,
    /// and the residual's variance that pair leaves unexplained.
    near: Vec<usize>,
    corr: Vec<f64>,
    residual_var: Vec<f64>,
}

/// The residual's constants: its relative standard deviation and correlation length.
#[derive(Debug, Clone, Copy)]
pub struct Residual {
    pub sd: f64,
    pub scale: f64,
}

impl Stream {
    /// A stream from the offline prediction (log values) with the RLS prior covariance
    /// `cov` (in units of the noise variance).
    pub fn new(prior: Vec<f64>, cov: f64, residual: Residual) -> CoreResult<Self> {
        let k = prior.len();
        let rls = Rls::new(
            3,
            RlsConfig {
                delta: cov,
                ..RlsConfig::default()
            },
        )?;
        Ok(Stream {
            prior,
            rls,
            n: vec![0; k],
            measured: vec![0.0; k],
            near: vec![0; k],
            corr: vec![0.0; k],
            residual_var: vec![residual.sd * residual.sd; k],
        })
    }

    /// (mean, variance / noise variance) at every pair: the prior corrected by the RLS fit.
    pub fn model(&self, phi: &[Features]) -> (Vec<f64>, Vec<f64>) {
        let a = self.rls.coef();
        let c = self.rls.covariance();
        let mean = phi
            .iter()
            .zip(&self.prior)
            .map(|(x, p)| p + (x[0] * a[0] + x[1] * a[1] + x[2] * a[2]))
            .collect();
        let var = phi
            .iter()
            .map(|x| {
                (0..3)
                    .flat_map(|i| (0..3).map(move |j| (i, j)))
                    .map(|(i, j)| x[i] * x[j] * c[3 * i + j])
                    .sum()
            })
            .collect();
        (mean, var)
    }

    /// (mean, variance) at every pair: a measured pair by its own mean, the others by the
    /// model (its variance times `inflate`) and the residual of their most correlated
    /// measured pair.
    pub fn estimate(&self, phi: &[Features], noise_var: f64, inflate: f64) -> (Vec<f64>, Vec<f64>) {
        let (model, var) = self.model(phi);
        let mut mean = Vec::with_capacity(model.len());
        let mut out_var = Vec::with_capacity(model.len());
        for i in 0..model.len() {
            if self.n[i] > 0 {
                mean.push(self.measured[i]);
                out_var.push(noise_var / f64::from(self.n[i]));
            } else {
                let j = self.near[i];
                mean.push(model[i] + self.corr[i] * (self.measured[j] - model[j]));
                out_var.push(var[i] * noise_var * inflate + self.residual_var[i]);
            }
        }
        (mean, out_var)
    }

    /// One measurement `value` (log) at pair `index`. A rejected RLS update (an error)
    /// leaves the stream unchanged.
    pub fn update(
        &mut self,
        phi: &[Features],
        index: usize,
        value: f64,
        residual: Residual,
    ) -> CoreResult<()> {
        self.rls.update(&phi[index], value - self.prior[index])?;
        if self.n[index] == 0 && residual.sd > 0.0 {
            // Where this pair is now the most correlated measured pair, its residual is taken.
            let at = phi[index];
            for (i, x) in phi.iter().enumerate() {
                let d2 = (x[1] - at[1]).powi(2) + (x[2] - at[2]).powi(2);
                let c = (-d2 / (2.0 * residual.scale * residual.scale)).exp();
                if c > self.corr[i] {
                    self.near[i] = index;
                    self.corr[i] = c;
                    self.residual_var[i] = residual.sd * residual.sd * (1.0 - c * c);
                }
            }
        }
        self.n[index] += 1;
        self.measured[index] += (value - self.measured[index]) / f64::from(self.n[index]);
        Ok(())
    }
}
