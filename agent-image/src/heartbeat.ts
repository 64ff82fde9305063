/**
 * Keeps the job's lease: a heartbeat every lease/3. A failed beat (server down) is only logged: the
 * script keeps running and the next beat tries again. A lost lease (409 job_lost, 401) is reported
 * by the API client's onJobLost; the loop then stops.
 */
import { FlowError } from "@flowsvc/core";
import type { Logger } from "./logger.js";

export interface Heartbeat {
  stop(): void;
}

export const startHeartbeat = (beat: () => Promise<number | undefined>, leaseMs: number, logger: Logger): Heartbeat => {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failures = 0;
  const schedule = (lease: number): void => {
    if (!stopped) timer = setTimeout(() => void tick(lease), Math.max(100, Math.floor(lease / 3)));
  };
  const tick = async (lease: number): Promise<void> => {
    try {
      const next = await beat();
      if (failures > 0) logger.info({ failures }, "heartbeat reached the server again");
      failures = 0;
      schedule(next ?? lease);
    } catch (err) {
      if (err instanceof FlowError && err.code === "job_lost") return;
      failures += 1;
      if (failures === 1 || failures % 10 === 0) logger.warn({ err, failures }, "heartbeat failed; the script keeps running");
      schedule(lease);
    }
  };
  schedule(leaseMs);
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
};
