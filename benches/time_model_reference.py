"""Vectorized numpy reference of the Wang & Chu kernel-time model (paper and default modes).

The executable specification the Rust core (rust/src/time/model.rs) is checked against
(agreement to 1e-9 relative) and the baseline its speed is measured against. Equation numbers refer to
Q. Wang, X. Chu, "GPGPU Performance Estimation with Core and Memory Frequency Scaling".

predict_reference(inputs_arrays, device_dict, core_mhz, mem_mhz, mode) ->
    (time_ms [K, N] float64, case [K, N] uint8)
inputs_arrays: dict of 1-D arrays of length K (one entry per kernel), keys = INPUT_KEYS.
device_dict: gpudvfs.TimeDevice(...).params().
core_mhz, mem_mhz: 1-D arrays of length N (the configurations).
"""
import numpy as np

INPUT_KEYS = ("warps_total", "active_warps", "warps_per_block", "gld_trans", "trans_per_req",
              "l2_hit_rate", "comp_inst", "shared_trans", "dp_inst", "sf_inst", "extra_chain", "imad_inst")

# Case labels (same numbering as the Rust `TimeCase` enum, u8).
COMPUTE, MEMORY, FEW_WARPS_SHORT, FEW_WARPS_LONG, SHARED_INFREQUENT, SHARED_INTENSIVE = 0, 1, 2, 3, 4, 5

def _clocks(dev, fc, fm):
    r = fc / fm
    dm_lat = dev["dm_lat_a"] * r + dev["dm_lat_b"]          # Eq. 4 (already in core cycles)
    dm_del = (dev["dm_del_a"] / fm + dev["dm_del_b"]) * r   # Table III is in memory cycles
    return r, dm_lat, dm_del


def predict_reference(inputs_arrays, device_dict, core_mhz, mem_mhz, mode="default"):
    g = {k: np.asarray(inputs_arrays[k], dtype=np.float64)[:, None] for k in INPUT_KEYS}
    dev = device_dict
    fc = np.asarray(core_mhz, dtype=np.float64)[None, :]
    fm = np.asarray(mem_mhz, dtype=np.float64)[None, :]
    r, dm_lat, dm_del = _clocks(dev, fc, fm)
    hr, aw, ng, ni, ns = g["l2_hit_rate"], g["active_warps"], g["gld_trans"], g["comp_inst"], g["shared_trans"]
    if mode == "paper":
        t_active, case = _paper(dev, g, r, dm_lat, dm_del)
    elif mode == "default":
        lat = hr * dev["l2_lat"] + (1.0 - hr) * dm_lat       # Eq. 5a with fc/fm applied once
        if dev["parallel_queues"]:                           # every transaction in the L2 queue,
            l2q = aw * ng * dev["l2_del"] + 0 * dm_del       # misses also in the DRAM queue
            dramq = aw * ng * (1.0 - hr) * dm_del
        else:                                                # Eq. 5b: one queue, hits then misses
            l2q = 0 * dm_del
            dramq = aw * ng * (hr * dev["l2_del"] + (1.0 - hr) * dm_del)
        mem = np.maximum(l2q, dramq)
        # one warp's issue time, FP64, special-function and FMA-heavy-only instructions at their pipe's rate
        issue = (ni * dev["inst_cycle"] + g["dp_inst"] * max(dev["dp_inst_cycle"] - dev["inst_cycle"], 0.0)
                 + g["sf_inst"] * max(dev["sf_inst_cycle"] - dev["inst_cycle"], 0.0)
                 + g["imad_inst"] * max(dev["imad_inst_cycle"] - dev["inst_cycle"], 0.0))
        comp = aw * issue                                    # issue time of all active warps
        shm = aw * ns * dev["sh_del"]                        # shared-memory bank time
        nreq = ng / g["trans_per_req"]
        # one warp's own instructions wait for each other (inst_lat), plus calibrated latency
        chain_ci = issue + ni * max(dev["inst_lat"] - dev["inst_cycle"], 0.0) + g["extra_chain"]
        chain = nreq * lat + ns / g["trans_per_req"] * dev["sh_lat"] + chain_ci
        p = dev["overlap_p"]
        # Scale before the power so large p cannot overflow.
        top = np.maximum(np.maximum(mem, comp + shm), chain)
        safe = np.where(top > 0, top, 1.0)
        terms = (l2q, dramq, comp + shm, chain)
        soft = safe * sum((x / safe) ** p for x in terms) ** (1.0 / p)
        soft = np.where(top > 0, soft, 0.0)
        exposed = lat                                        # one round's latency left bare
        t_active = soft
        case = np.where(chain >= np.maximum(mem, comp + shm), FEW_WARPS_SHORT,
                        np.where(mem >= comp + shm, MEMORY, np.where(shm > comp, SHARED_INTENSIVE, COMPUTE)))
    else:
        raise ValueError(f"mode must be 'paper' or 'default', got {mode!r}")
    rounds = g["warps_total"] / (aw * dev["sm_count"])      # Eq. 6, #Wpb*#B = total warps
    cycles = t_active * rounds
    if mode == "default":
        # overlapped rounds: the bare latency once per kernel (pipeline fill), else per round
        cycles = cycles + (exposed if dev["overlapped_rounds"] else exposed * rounds)
    time_ms = cycles / (fc * 1e3)
    return time_ms, case.astype(np.uint8)


def _paper(dev, g, r, dm_lat, dm_del):
    """The text as printed (see the resolutions list for what each literal choice means)."""
    hr, aw, wpb = g["l2_hit_rate"], g["active_warps"], g["warps_per_block"]
    ng, ni, ns = g["gld_trans"], g["comp_inst"], g["shared_trans"]
    lat = hr * dev["l2_lat"] + (1.0 - hr) * dm_lat * r       # Eq. 5a as printed: fc/fm twice
    dl = hr * dev["l2_del"] + (1.0 - hr) * dm_del            # Eq. 5b
    ic, shl = dev["inst_cycle"], dev["sh_lat"]
    ng_safe = np.where(ng > 0, ng, 1.0)
    avr = np.where(ng > 0, ic * ni / ng_safe, 0.0)           # Eq. 7a/7b (ng == 0 handled below)
    avr_f = avr
    o = ng                                                   # o_itrs: one period per transaction
    t9 = ic * ni * aw + lat                                  # Eq. 9 (avr*#Aw*o_itrs, o_itrs=ng)
    t11 = lat + avr_f + dl * wpb * o                         # Eq. 11 as printed (#Wpb)
    t13 = dl * aw + lat + avr_f + (avr_f + lat) * (o - 1.0)  # Eq. 13
    t15 = avr_f * (aw - 1.0) + (avr_f + lat) * o             # Eq. 15
    c8 = (avr >= dl) & (avr * (aw - 1.0) >= lat)             # Eq. 8a, 8b
    c10 = (avr <= dl) & (avr + lat >= dl * (aw - 1.0))       # Eq. 10a, 10b as printed
    c12 = (avr <= dl)                                        # Eq. 12 (rest of avr <= del)
    t_glob = np.where(c8, t9, np.where(c10, t11, np.where(c12, t13, t15)))
    k_glob = np.where(c8, COMPUTE, np.where(c10, MEMORY, np.where(c12, FEW_WARPS_SHORT, FEW_WARPS_LONG)))
    # Shared memory (Sec. V-B).
    t17 = avr_f + lat + dl * aw * ng                         # Eq. 17, gld_trans = per-warp total
    half = ng / 2.0                                          # o_itrs = 1: loads in phase 1, stores in phase 3
    t1 = 2 * avr_f + dl * half * aw + lat + shl              # Eq. 18
    t2 = avr_f * (wpb - 1.0) + (avr_f + shl) * ns            # Eq. 19, i_itrs = shared trans per warp
    t3 = 2 * avr_f + dl * half * wpb + lat + shl             # Eq. 20
    t21 = t1 + t2 + t3                                       # Eq. 21, o_itrs = 1
    c16 = (avr <= dl) & (avr + shl <= dl * (aw - wpb))       # Eq. 16a, 16b
    t_sh = np.where(c16, t17, t21)
    k_sh = np.where(c16, SHARED_INFREQUENT, SHARED_INTENSIVE)
    has_sh = ns > 0
    t = np.where(has_sh, t_sh, t_glob)
    k = np.where(has_sh, k_sh, k_glob)
    # gld_trans == 0: Eq. 7a is undefined; avr_comp -> infinity satisfies Eq. 8a/8b (compute).
    return np.where(ng == 0, t9, t), np.where(ng == 0, COMPUTE, k)
