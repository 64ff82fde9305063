/**
 * A step site, `<name>` or `<name>#<n>`: the n-th (zero-based) call of the step of that name, as
 * `flow rerun --from` and `flow steps` name it. The ordinal is stored as a Postgres integer.
 */
import { FlowError } from "./errors.js";
import { textProblem } from "./json-guard.js";

/** The largest ordinal a site may name: a Postgres `integer` (2^31 - 1). */
export const MAX_STEP_ORDINAL = 2_147_483_647;

const FORM = "--from takes a step name or name#<n> (n counts the step's calls from 0)";

export const parseSite = (site: string): { name: string; ordinal: number } => {
  const problem = textProblem(site);
  if (problem) throw new FlowError("invalid_argument", `--from ${problem}; ${FORM}`, { details: { field: "from" } });
  const m = /^(.+?)(?:#(\d+))?$/.exec(site);
  if (!m || !m[1]) throw new FlowError("invalid_argument", `${FORM}, not ${JSON.stringify(site)}`, { details: { field: "from" } });
  const ordinal = m[2] === undefined ? 0 : Number(m[2]);
  if (ordinal > MAX_STEP_ORDINAL) {
    throw new FlowError(
      "invalid_argument",
      `--from ${m[1]}#${m[2]!.length > 24 ? `${m[2]!.slice(0, 24)}...` : m[2]}: the call number is over ${MAX_STEP_ORDINAL}, the most a run can record`,
      {
        details: { field: "from", max: MAX_STEP_ORDINAL },
        hint: `list the run's steps and their numbers with \`flow steps <run>\``,
      },
    );
  }
  return { name: m[1], ordinal };
};
