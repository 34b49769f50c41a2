"""How well the models do, measured, kept apart from the models.

As scikit-learn keeps ``model_selection`` apart from its estimators: everything here imports
the models; no model imports it.

| module            | what                                                                 |
|-------------------|----------------------------------------------------------------------|
| `time_errors`     | the time model's errors on a measured grid, and its baselines        |
| `nested`          | nested leave-one-application-out: groups, aggregates, the choice     |
| `time_candidates` | the time protocol's candidate settings and their kernels             |
| `time_cv`         | the time protocol: settings chosen by nested leave-one-application-out |
| `time_cv_report`  | the time protocol's report (`TimeCVReport`)                          |
| `interval_cv`     | the time interval's coverage on applications held out                |
| `dcgm_time`       | the DCGM time model scored leave-one-workload-out                    |
| `power_errors`    | the power model's grouped cross-validation                           |
| `power_cv`        | the power fit's setting chosen by grouped CV across GPUs             |
| `selection`       | energy regret of the models' choice on measured grids, with baselines |
| `dcgm_selection`  | the same on DCGM grids, each workload's models fitted without it     |
| `safe`            | the safe choice: back off toward a known pair where the model is unsure |
| `safe_grids`      | the safe choice's rule chosen on other GPUs' grids, each GPU left out |
| `regret`          | regret tables, mean and worst, one pair for all, near ties           |
| `online_traces`   | the traces the online replay draws from a grid, and their rows       |
| `online_replay`   | the online predictors replayed on traces drawn from a grid           |
| `replay_table`    | a governor replay's table (time and power, measured and predicted)   |
| `replay_strategies` | the governor and the baselines a replay runs on the same phases    |
| `govern_replay`   | governors replayed on recorded training traces                       |
| `governor_cv`     | the governor's constants chosen over replays, and its defaults       |
| `deadline_cv`     | the deadline's confirmation chosen with each trace or grid held out  |
| `hardware_report` | the report of a run on a real GPU (`gpudvfs validate`)               |
| `observe_chain`   | observe, then predict: each kernel held out of a recorded observation |
"""
