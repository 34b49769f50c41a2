"""How well the models do, measured, kept apart from the models.

As scikit-learn keeps ``model_selection`` apart from its estimators: everything here imports
the models; no model imports it. Each module's docstring says which protocol it runs
(cross-validation of the time, power and DCGM models; regret of a choice of clocks and its
safe variant; the online and governor replays; the report of a run on a real GPU).
"""
