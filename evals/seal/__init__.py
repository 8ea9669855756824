"""The seal of an eval run, measured: ``battery`` runs the probes of one run and returns one ``report``; the leak
probes (``leak_probes``, run in the sandbox as ``leak_probe_script``) try every way to read the answer, the
contamination walk (``contamination``, ``contamination_walk``) looks for the deleted code by content, the tamper probes
(``tamper_probes``) try real cheats through real scoring; ``cache`` keeps the verdicts that do not depend on the
suite."""
