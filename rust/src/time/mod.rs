//! Analytical kernel-time model under core/memory DVFS (Q. Wang, X. Chu, "GPGPU Performance
//! Estimation with Core and Memory Frequency Scaling", Sec. IV-V, Tables II-IV).
//!
//! Counters are profiled once at a reference configuration (700/700 MHz); the model predicts
//! time at any (fc, fm). Two modes: [`TimeMode::Paper`] evaluates the text as printed,
//! [`TimeMode::Default`] the resolved model below. `benches/time_model_reference.py` is the
//! numpy specification of both (agreement with this module to ~1e-15 relative).
//!
//! The evidence behind the resolutions and extensions below (fits, ablations, cross-validated
//! figures) is in `docs/methodology.md`, "Time model: notes from the Rust core".
//!
//! # Resolutions of the paper's ambiguities (Default mode)
//! 1. **Table II columns vs Eq. 4.** Table II lists fc = fm in every row, so fc/fm = 1 and
//!    Eq. 4 would be constant; the cycles fit Eq. 4 only with the core clock fixed at
//!    400 MHz. Read: fc = 400.
//! 2. **Eq. 5a applies fc/fm twice.** Eq. 4 already gives dm_lat in core cycles including
//!    fc/fm; Paper mode multiplies again (as printed), Default applies it once. Physically the
//!    DRAM part of the latency is fixed in ns (b/fc + a/fm), which only the single factor gives.
//! 3. **dm_del (Table III).** Its cycles are at fc = fm, i.e. memory cycles (the relative
//!    times of memory-bound kernels across memory clocks bear the labels out). Law:
//!    dm_del_mem = 726.13/fm + 8.281 (R^2 0.994, the efficiency rise with fm), times fc/fm
//!    (Eq. 5b) in both modes.
//! 4. **Eq. 10b/12b inequality direction.** As printed, "memory-dominated" needs
//!    avr_comp + agl_lat >= agl_del (#Aw-1), i.e. the queue is *not* saturated; the saturation
//!    condition is the reverse. Flipping it helps only together with 5.
//! 5. **#Wpb vs #Aw in Eq. 11.** The DRAM queue is shared by all resident warps, not one
//!    block: Default uses #Aw (as Eq. 17 does).
//! 6. **Latency per transaction vs per request.** The queue (delay) is charged per
//!    transaction (32-byte sector): M = #Aw * gld_trans * agl_del per round. Latency is charged
//!    per *request* (a warp's transactions of one instruction are pipelined): the latency
//!    chain uses gld_trans / trans_per_req requests (4 = coalesced 32-bit accesses; VA, BS, TR
//!    show exactly 4 sectors per access in the counters).
//! 7. **Hard switches between cases.** Eq. 8-17 switch on thresholds, giving jumps in
//!    time across the grid. Default uses one expression: per round on one SM,
//!    T_active = softmax_p(M, C + S, P) + agl_lat, with M = memory queue (above), C = #Aw *
//!    comp_inst * inst_cycle (issue), S = #Aw * shared_trans * sh_del (bank time), P = one
//!    warp's chain = requests * agl_lat + shared_requests * sh_lat + comp_inst * inst_cycle,
//!    softmax_p(x) = (sum x_i^p)^(1/p) (p -> inf is the hard max of Eq. 9/11/13, p = 1 full
//!    serialisation), plus one exposed latency (pipeline fill, Eq. 9/11/17; per round or once
//!    per kernel, 17). p is chosen by the protocol of `python/gpudvfs/time/crossval.py` (nested
//!    leave-one-application-out over both GTX 980 grids, `gpudvfs time cv`; the preset's value
//!    is in [`TimeDevice::gtx980`]). The case label is the largest term.
//! 8. **Shared-memory cases (Eq. 16-21)** need o_itrs/i_itrs from source code. Default folds
//!    shared memory into S (throughput) and P (latency); Paper uses Eq. 16 to choose Eq. 17
//!    (gld_trans = per-warp total) or Eq. 18-21 with o_itrs = 1, gld_trans = per-warp total / 2
//!    (loads in phase 1, stores in phase 3), i_itrs = shared transactions per warp.
//! 9. **o_itrs in Eq. 9-15** (Paper): one period = one transaction, so o_itrs = gld_trans per
//!    warp and avr_comp = inst_cycle * comp_inst / gld_trans (Eq. 7); gld_trans = 0 makes Eq. 7a
//!    undefined and is treated as Eq. 9 (avr_comp -> inf satisfies 8a/8b).
//! 10. **Eq. 6** uses #Wpb * #B = total warps; rounds are fractional (no tail quantisation).
//! 11. **Constants the paper does not print:** inst_cycle = 0.25 (128 cores / 32 lanes = 4
//!     warp instructions per cycle per Maxwell SM), sh_lat = 28 cycles (Maxwell, Mei & Chu
//!     ref. 31), sh_del = 1 cycle per transaction (32 banks x 4 B per cycle), max 64 warps/SM.
//!     Hardware figures, none fitted to the grids.
//!
//! # Extensions beyond the paper (Default mode)
//! Each is a candidate of the protocol (7); the preset holds what the protocol chooses on all
//! kernels.
//!
//! 12. **Pipe rates: FP64 and special-function instructions issue at their pipe's rate**
//!     (the paper costs every instruction `inst_cycle`): a GM204 SM has 4 FP64 units, so a
//!     warp's FP64 instruction takes 32 / 4 = 8 cycles (`dp_inst_cycle`), and 32 SFU lanes,
//!     so a special-function one (exp, log, sin, rsqrt...) takes 32 / 32 = 1 cycle
//!     (`sf_inst_cycle`; 2 on Volta and later, 16 lanes): hardware figures (CUDA C
//!     Programming Guide's throughput table), not fitted. Counted from nvprof's `inst_fp_64`
//!     and `flop_count_sp_special` (thread operations / 32 per warp) where the profile has
//!     them, 0 (the issue rate) where it does not. In the preset. Likewise integer
//!     multiply-adds on GA10x and later, where only the FMA-heavy pipe runs them, at half the
//!     FP32 rate (`imad_inst_cycle`, 32 / the guide's 32-bit integer multiply-add lanes):
//!     `imad_inst` is the FMA-heavy pipe's warp instructions beyond the FMA-light pipe's, the
//!     FP32 work being split over both.
//! 13. **L2 and DRAM queues in parallel or in series** (`parallel_queues`): Eq. 5b averages
//!     one delay over hits and misses, i.e. queues them one after the other; in parallel,
//!     every transaction occupies an L2 slice for `l2_del`, a miss also a DRAM channel for
//!     `dm_del`, as separate terms of the soft maximum. The preset queues them in series,
//!     as Eq. 5b: parallel queues lose under the protocol.
//! 14. **Block-starved kernels** (calibrated predictions, `python/gpudvfs/time/model.py`):
//!     a kernel whose achieved occupancy stays below 0.75 of its theoretical occupancy, over
//!     at least 4 waves, waited for blocks to arrive, at a rate no clock moves. Its time is the
//!     soft maximum of that floor and the model at full slots; the floor is what the
//!     reference time leaves over the latter. The test needs the theoretical occupancy that
//!     Nsight Compute reports (registers and shared memory included) and nvprof grids lack:
//!     against the occupancy the block size alone allows, it fires on kernels held back by
//!     registers or shared memory.
//! 15. **Dependent instruction latency** (`inst_lat`): in one warp's chain (P of 7) an
//!     instruction waits for its operand, 6 cycles on Maxwell (Mei & Chu; Jia et al.), not
//!     the issue cost: P's instruction part is comp_inst * inst_lat. In the preset.
//! 16. **Latency no counter shows** (`extra_chain`, core cycles per warp): 0 from counters;
//!     the "dram-check" calibration sets it when a kernel's DRAM transfers fill less than
//!     0.8 of its reference time and the model finds it faster than measured (memory-bound
//!     classification checked against the bandwidth the delay law gives). Not the default:
//!     the protocol leaves it out.
//! 17. **Overlapped rounds** (`overlapped_rounds`): Eq. 9/11/17 leave one latency bare per
//!     round of resident warps, as if each round waited for the last to drain. Warps retire
//!     and others start while the rest wait (Little's law), so the latency is bare once per
//!     kernel, the pipeline's fill: T = (T_round * rounds + latency) / fc, affine in the
//!     blocks where the paper's is linear. In the preset.
//! 18. **How the protocol aggregates the training kernels' errors**
//!     (`python/gpudvfs/time/crossval.py`): the aggregate (mean, trimmed mean, median, mean
//!     logarithm, mean rank) is itself chosen, one level in, so that the few kernels no
//!     setting fits do not decide between settings for the rest. On all kernels the trimmed
//!     mean wins; its choice is the preset.
//!
//! Monotonicity: in Default every term divided by fc is non-increasing in fc and in fm and
//! the soft max is increasing and 1-homogeneous, so time never increases when a clock rises
//! (tested). Paper mode has exceptions: the double fc/fm of Eq. 5a makes latency-dominated
//! predictions grow with fc, and case switches make jumps (tested on one example).
//!
//! # Counters -> inputs (nvprof names; per-warp = kernel total / warps)
//! | input | nvprof | Nsight Compute (mapped in python/gpudvfs/measure/counters) | DCGM |
//! |---|---|---|---|
//! | warps_total (#W) | blocks * ceil(block/32) where the launch is known, else `warps` (grid*block/32) | launch__grid_size * ceil(launch__block_size/32) | none |
//! | active_warps (#Aw) | achieved_occupancy * 64 | sm__warps_active.avg.pct_of_peak_sustained_active/100 * max | sm_occupancy * max |
//! | gld_trans | (l2_read_transactions + l2_write_transactions)/W | lts__t_sectors_op_{read,write}.sum / W | none |
//! | l2_hit_rate | 1 - (dram_read+dram_write)/(l2_read+l2_write), clipped to 0..=1 | dram__sectors_{read,write}.sum | none |
//! | comp_inst | inst_issued / W (all issued warp instructions, replays included) | smsp__inst_issued.sum / W | none |
//! | dp_inst | inst_fp_64 / 32 / W (thread instructions to warp instructions; 0 if absent) | smsp__sass_thread_inst_executed_op_dfma/dadd/dmul sums / 32 / W | none |
//! | sf_inst | flop_count_sp_special / 32 / W (0 if absent) | smsp__inst_executed_pipe_xu.sum / W (the XU pipe's warp instructions) | none |
//! | imad_inst | none (0) | max(0, smsp__inst_executed_pipe_fmaheavy.sum - smsp__inst_executed_pipe_fmalite.sum) / W (0 if absent) | none |
//! | shared_trans | (shared_load + shared_store transactions)/W | l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum / W | none |
//! | warps_per_block | not a counter: the launch's block size/32 where known, else 8 (256 threads) | ceil(launch__block_size/32) | none |
//! | trans_per_req | L2 transactions / (gld + gst requests, each `g*_transactions` / `g*_transactions_per_request`) where counted, else 4 (coalesced 32-bit) | smsp__inst_executed_op_global_{ld,st}.sum requests | - |
//! | slot_warps (block-starved test, 14) | none (nvprof grids do not report theoretical occupancy) | sm__maximum_warps_per_active_cycle_pct/100 * max (registers and shared memory included) | - |
//! | o_itrs, i_itrs | not determined by counters; see 8-9 | - | - |
//! Assumptions: l2 transactions are all global traffic reaching L2 (texture/L1 hits are not
//! modelled, as in the paper); the hit rate is traffic-based because nvprof's l2 hit-rate
//! metrics cover reads only; DCGM has no per-kernel counts, so it cannot drive this model.
//!
//! # Accuracy
//! The model's figures (`gpudvfs time cv`, `gpudvfs time eval`; inputs from the 700/700 row)
//! are in `docs/accuracy.md`.
pub mod device;
pub mod model;

pub use device::{fit_dm_del, fit_dm_lat, LinearFit, TimeDevice};
pub use model::{
    core_shares, predict, predict_rows, KernelInputs, TimeCase, TimeMode, TimePrediction, N_INPUTS,
};
