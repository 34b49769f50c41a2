"""From a profile of any GPU to predicted time, power and energy at every clock pair (`predict_profile`)."""

from gpudvfs.predict.prediction import ProfilePrediction, predict_profile

__all__ = ["ProfilePrediction", "predict_profile"]
