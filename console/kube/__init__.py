"""The gateway to data-plane clusters: the only package that imports `kubernetes`. It imports
nothing of the project outside itself; only the engine (`console.engine`) calls it.

- `client`: an API client per Cluster from its parsed, already checked kubeconfig;
- `gateway`: raw-JSON requests, paginated LISTs, create / scale / delete;
- `observations`: frozen dataclasses parsed from LIST items (fields only, never message wording);
- `manifests`: pure functions from a Task to the objects the console creates;
- `apply`: create (409: read and compare), scale, delete.
"""

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "trainyard"
JOB_LABEL = "trainyard.io/job"
TASK_LABEL = "trainyard.io/task"
ROLE_LABEL = "trainyard.io/role"
RUN_LABEL = "trainyard.io/run"
ADDON_LABEL = "trainyard.io/addon"
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
