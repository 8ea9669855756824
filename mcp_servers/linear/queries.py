"""Every GraphQL document the ``linear`` server sends to Linear, by operation name.

They are plain strings, checked against Linear's published schema (``linear-schema.graphql``, pinned by the
repository's ``make specs``) by a test that validates each one in :data:`OPERATIONS`, and by the test fake, which
validates every request it receives.
A connection is always asked for with ``first``/``after`` and ``pageInfo { hasNextPage endCursor }`` so that
:meth:`LinearApi.paginate` can follow it.
"""

from __future__ import annotations

__all__ = [
    "COMMENT_CREATE",
    "ISSUE",
    "ISSUES",
    "ISSUE_COMMENTS",
    "ISSUE_CREATE",
    "ISSUE_TEAM_STATES",
    "ISSUE_UPDATE",
    "LABELS",
    "OPERATIONS",
    "SEARCH_ISSUES",
    "TEAMS",
]

TEAMS = """
query Teams($first: Int!, $after: String) {
  teams(first: $first, after: $after) {
    nodes {
      id
      key
      name
      states(first: 100) { nodes { id name type position } }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""

LABELS = """
query Labels($filter: IssueLabelFilter, $first: Int!, $after: String) {
  issueLabels(filter: $filter, first: $first, after: $after) {
    nodes { id name team { id key } }
    pageInfo { hasNextPage endCursor }
  }
}
"""

SEARCH_ISSUES = """
query SearchIssues($term: String!, $filter: IssueFilter, $first: Int!, $after: String) {
  searchIssues(term: $term, filter: $filter, first: $first, after: $after) {
    nodes {
      id
      identifier
      title
      priority
      url
      state { name }
      assignee { name displayName }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""

ISSUES = """
query Issues($filter: IssueFilter, $first: Int!, $after: String) {
  issues(filter: $filter, first: $first, after: $after, orderBy: updatedAt) {
    nodes {
      id
      identifier
      title
      priority
      url
      state { name }
      assignee { name displayName }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""

_COMMENT_FIELDS = "nodes { id body createdAt user { name displayName } } pageInfo { hasNextPage endCursor }"

ISSUE = f"""
query Issue($id: String!, $commentsFirst: Int!) {{
  issue(id: $id) {{
    id
    identifier
    title
    description
    priority
    url
    createdAt
    updatedAt
    state {{ name type }}
    team {{ key name }}
    assignee {{ name displayName }}
    labels(first: 100) {{ nodes {{ name }} }}
    comments(first: $commentsFirst) {{ {_COMMENT_FIELDS} }}
  }}
}}
"""

ISSUE_COMMENTS = f"""
query IssueComments($id: String!, $first: Int!, $after: String) {{
  issue(id: $id) {{
    comments(first: $first, after: $after) {{ {_COMMENT_FIELDS} }}
  }}
}}
"""

ISSUE_TEAM_STATES = """
query IssueTeamStates($id: String!) {
  issue(id: $id) {
    id
    identifier
    url
    state { id name }
    team { key name states(first: 100) { nodes { id name type position } } }
  }
}
"""

ISSUE_CREATE = """
mutation IssueCreate($input: IssueCreateInput!) {
  issueCreate(input: $input) {
    success
    issue {
      id
      identifier
      title
      url
      priority
      state { name }
      team { key }
      labels(first: 100) { nodes { name } }
    }
  }
}
"""

COMMENT_CREATE = """
mutation CommentCreate($input: CommentCreateInput!) {
  commentCreate(input: $input) {
    success
    comment { id url issue { identifier } }
  }
}
"""

ISSUE_UPDATE = """
mutation IssueUpdate($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) {
    success
    issue { id identifier url state { name } }
  }
}
"""

OPERATIONS: dict[str, str] = {
    "Teams": TEAMS,
    "Labels": LABELS,
    "SearchIssues": SEARCH_ISSUES,
    "Issues": ISSUES,
    "Issue": ISSUE,
    "IssueComments": ISSUE_COMMENTS,
    "IssueTeamStates": ISSUE_TEAM_STATES,
    "IssueCreate": ISSUE_CREATE,
    "CommentCreate": COMMENT_CREATE,
    "IssueUpdate": ISSUE_UPDATE,
}
"""Operation name → document: every document the server can send (a test validates each against the schema)."""
