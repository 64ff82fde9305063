-- The graph driver's poll (store/src/graph-runs.ts graphRunsNeedingWork, every 250 ms in each
-- controller) and its sweep (liveGraphRuns, at start and after a lost LISTEN connection) read only
-- what is in flight (session 9). The poll joined every graph node to its run and filtered: a scan
-- of every node of every graph run ever run, four times a second, whatever the plan. Now each of
-- its parts is read from a small index of live rows:
--   graph_nodes_retry_due (migration 010)  pending nodes with a retry's not_before
--   graph_nodes_running                    running nodes (an inline attempt whose owner is gone, a job past its timeout)
--   runs_graph_live                        graph and pipeline runs not ended (queued ones for the poll, all for the sweep)
-- Only graph and pipeline runs enter runs_graph_live (its predicate names their workflows, as
-- core's GRAPH_ENGINE_WORKFLOWS does): a script run's insert and updates pay nothing for it. The
-- statements repeat both predicates literally, so the planner can prove them for a generic plan.
create index graph_nodes_running on graph_nodes (run_id) where status = 'running';
create index runs_graph_live on runs (created_at)
  where workflow in ('flowsvc-graph/v1', 'flowsvc/pipeline/v1') and status in ('queued', 'running', 'parked');
