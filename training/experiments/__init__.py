"""Experiments: a question answered by many runs — a search space swept with seeds as repeats, searched and pruned
by Optuna (ask-and-tell, its study in labbot's database), under limits and a budget.

``space`` and ``plan`` parse and check what a front door asks (pure); ``scores`` holds the statistics (pure);
``study`` is the Optuna side; ``controller`` moves every open experiment one step each watchdog tick, on the leader;
``service`` is what the front doors call.
"""
