-- Kubernetes mode (issue 16): the FlowRun mirror (controller/src/kube/flowrun-mirror.ts) reads, on
-- every pass, the runs still in flight and those that finished within the FlowRun TTL. These two
-- partial indexes keep that read off a scan of the whole runs table.
create index runs_live_created on runs (created_at) where status in ('queued', 'running', 'parked');
create index runs_finished_at on runs (finished_at) where finished_at is not null;
