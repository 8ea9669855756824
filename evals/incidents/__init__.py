"""The incident suite: the lab's own pages and 👎 feedback as eval cases, graded by a judge model: ``cases`` (a page
frozen into a case, what the model and the judge read, the verdict), ``feedback_cases`` (a 👎 frozen into a case),
``runner`` (the suite through inspect) and ``job`` (the ``eval-incidents`` job)."""
