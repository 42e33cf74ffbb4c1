"""The workload's own word beside the Kubernetes phase: signals posted by the pods and stored
(`intake`), folded into one report row per Job and acted on by its policies (`report`), the
poller's fallbacks when a pod cannot post (`fallbacks`), and RLinf's progress lines read from
a log (`rlinf_logs`). The state itself is derived from the report by the pure rule in
`jobs.status.workload`."""
