// A humantime duration as a zod string (graph node configs, pipeline timeouts): core's parseDuration
// decides, its message is the refusal. Kept apart from duration.ts, which the CLI loads without zod.
import { z } from "zod";
import { parseDuration } from "./duration.js";

/** Why `text` is not a duration (parseDuration's message), or undefined when it is one. */
export const durationProblem = (text: string): string | undefined => {
  try {
    parseDuration(text);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
};

/** A string that parseDuration accepts. */
export const DurationText = z.string().superRefine((v, ctx) => {
  const p = durationProblem(v);
  if (p !== undefined) ctx.addIssue({ code: "custom", message: p });
});
