"""The incident suite: the lab's own pages and 👎 feedback as eval cases, graded by a judge model.

``cases`` (what a case is, what the model and the judge read, the verdict; pure), ``runner`` (the suite through
inspect) and ``job`` (the ``eval-incidents`` job) run where the job runs; ``page_cases`` and ``feedback_cases`` freeze a
case from the control plane's database and are imported only by ``labbot.evals.service``."""
