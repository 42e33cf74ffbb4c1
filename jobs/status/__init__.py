"""The spec's status rules, pure (values in, values out; no database, no clock, no model and no
web helper imported; `freshness` reads one setting, TRAINYARD_STALE_AFTER, when called). A rule
is written in one module here; the database filters that pick the rows a rule needs
(`jobs.problem_facts`, `console.engine.rows`, the job page's suspect Workers) are its coarse form,
each naming the rule it mirrors, and those of the pod classifier are proven by a test
(tests/jobs/test_pod_problems.py):

- `lifecycle`: Task, Job and Workflow phases, the transitions operations may make, the actions
  offered per phase, what blocks a Workflow child (spec §Job status, §Task status, §Workflow);
- `observed`: a Task's phase, ready count and message from its workload and pods (through
  `lifecycle.task_phase`), an add-on's phase and version (§Node and Addon status), the GPUs a
  pod holds on its node;
- `problems`: the pod reasons Kubernetes and the console give, what a Worker row and a Task
  message say about a pod, and the one pod classifier, `classify` (§Pod and Worker status);
- `troubleshoot`: the known problems, by layer (§Troubleshooting), for the job page's panel and
  the dashboard alike;
- `attention`: why a Job needs a look on the dashboard (a failure nobody looked at, the known
  problems, Pending too long, a stale or unreachable status);
- `freshness`: how old and how trustworthy what a cluster reported is (stale, observed at).
"""
