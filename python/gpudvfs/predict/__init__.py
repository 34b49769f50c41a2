"""From a profile of any GPU to predicted time, power and energy at every clock pair.

| module       | what                                                                 |
|--------------|----------------------------------------------------------------------|
| `prediction` | `predict_profile` and its `ProfilePrediction`: arrays for a scheduler |
| `profile`    | the GPU a profile came from, its kernels' inputs, the whole prediction |
| `inputs`     | the power model's inputs: utilizations, or an observed model's activities |
"""

from gpudvfs.predict.prediction import ProfilePrediction, predict_profile

__all__ = ["ProfilePrediction", "predict_profile"]
