"""The gateway to data-plane clusters: the only package that imports `kubernetes`.

- `kubeconfig`: validation of a registered kubeconfig and an API client per Cluster;
- `gateway`: raw-JSON requests, paginated LISTs, create / scale / delete;
- `observations`: frozen dataclasses parsed from LIST items (fields only, never message wording);
- `manifests`: pure functions from a Task to the objects the console creates;
- `problems`: what a Worker row and a Task message say about a pod, from its observation.
"""

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "trainyard"
JOB_LABEL = "trainyard.io/job"
TASK_LABEL = "trainyard.io/task"
ROLE_LABEL = "trainyard.io/role"
RUN_LABEL = "trainyard.io/run"
ADDON_LABEL = "trainyard.io/addon"
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGER}"
