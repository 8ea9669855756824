"""A sample's sealed sandbox: bubblewrap (``bwrap``), the sample's cgroup (``cgroup``), the allow-list proxy
(``proxy``), the task's venv (``venvs``) and the sandbox as inspect's ``labbot`` provider (``inspect_provider``)."""
