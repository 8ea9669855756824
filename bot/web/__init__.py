"""What every HTTP front door shares (the API under ``/api/v1``, Slack's ``POST /slack/events``): the JSON error
body, reading a body under a size limit, and the edge that refuses ids no database can hold. No door imports another;
both import this."""
