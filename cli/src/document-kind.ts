/**
 * Which files are documents a server runs rather than scripts: `flow submit` sends them as graphs
 * or pipelines, and `flow run` (a local run of a script) refuses them. No imports: the CLI loads
 * this at start-up of both commands.
 */

/** A `.json` file, or `--as graph`: the file is a graph document (`flowsvc-graph/v1`). */
export const isGraphSubmit = (file: string, as: string | undefined): boolean =>
  as === "graph" || (as === undefined && file.toLowerCase().endsWith(".json"));

/** `--as pipeline|yaml`, or a `.yaml`/`.yml` file without `--as`: the file is a pipeline (`flowsvc/pipeline/v1`). */
export const isPipelineSubmit = (file: string, as: string | undefined): boolean =>
  as === "pipeline" || as === "yaml" || (as === undefined && /\.ya?ml$/i.test(file));

/** A file name as a message shows it: as typed when it is plain, else JSON-quoted (no control character reaches the terminal). */
export const shownFile = (file: string): string => (/^[\w./@+,:=-]{1,1024}$/.test(file) ? file : JSON.stringify(file));
