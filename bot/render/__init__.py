"""What runs, pages, evals, feedback and comparisons look like as text and plots: pure functions of the API's JSON
(and of telemetry, for the plots) that the CLI, Slack and the HTTP API all show. Nothing here talks to anything."""
