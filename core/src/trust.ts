/**
 * Trust: whether a run may see the project's secrets, credentials and accounts (spec: "Untrusted-
 * event runs"; SECURITY.md "Untrusted is contagious"). The whole rule is here; `trusted` has no
 * default in the database, so every run and event insert must say where its trust came from.
 *
 * - A person's direct act (`flow submit`, an HTTP emit with a user token) is trusted.
 * - A forge delivery is as trusted as the forge shaping judged it (a fork's pull request, an
 *   outsider's comment are not).
 * - A handler run is as trusted as the event that started it.
 * - Whatever a run causes is as trusted as the run: a spawned child, an emitted event, its `run.*`
 *   and `spawn` events, its activities and retries, and a rerun of it (a rerun replays the run's
 *   source and recorded results, so a person asking for it does not vouch for them).
 * - A run that takes in an untrusted event (`flow wait-event`) is untrusted from then on.
 *
 * Only a person re-submitting the work makes it trusted again.
 */
export type TrustCause =
  | { by: "person" }
  | { by: "delivery"; trusted: boolean }
  | { by: "event"; event: { readonly trusted: boolean } }
  | { by: "run"; run: { readonly trusted: boolean } };

/** Whether what `cause` starts (a run, an event) is trusted. */
export const trustOf = (cause: TrustCause): boolean => {
  switch (cause.by) {
    case "person":
      return true;
    case "delivery":
      return cause.trusted;
    case "event":
      return cause.event.trusted;
    case "run":
      return cause.run.trusted;
  }
};

/** A run's trust after it receives an event's envelope (`flow wait-event`): untrusted is contagious. */
export const trustAfterReceiving = (run: { readonly trusted: boolean }, event: { readonly trusted: boolean }): boolean =>
  run.trusted && event.trusted;
