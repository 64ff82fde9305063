/** The refusal of what only a flowsvc server runs, in a local run (`flow run`). */
import { FlowError } from "@flowsvc/core";
import { shownFile } from "../document-kind.js";

/**
 * The refusal of a call only a server can serve. The script's `flow` client prints the message
 * alone (a socket answer has no hint), so the message itself says what to do instead.
 */
export const needsServer = (what: string, why: string, file: string): FlowError => {
  const shown = shownFile(file);
  return new FlowError("invalid_argument", `${what} needs a flowsvc server (${why}): run the script on one with \`flow submit ${shown}\``, {
    hint: `start a server with \`flow server\`, then \`flow submit ${shown} --follow\`; or leave the call out of local runs`,
  });
};
