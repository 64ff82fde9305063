/** What `flow server` tells the person who started it. */
export interface Banner {
  url: string;
  dataDir: string;
  database: string;
  agents: string;
  token: string | undefined;
  cliConfig: { path: string; written: boolean };
  masterKeyGenerated: string | undefined;
}

export const printBanner = (b: Banner): void => {
  const lines = [
    `flowsvc is running at ${b.url}`,
    `  data dir:  ${b.dataDir}`,
    `  database:  ${b.database}`,
    `  agents:    ${b.agents}`,
    `  project:   default/default`,
  ];
  if (b.masterKeyGenerated) {
    lines.push(
      "",
      `warning: generated a master key at ${b.masterKeyGenerated}; losing it loses every secret. Set FLOWSVC_MASTER_KEY for durable deployments.`,
    );
  }
  if (b.token) {
    lines.push("", "First start: created user admin with an API token.");
    lines.push(
      b.cliConfig.written
        ? `  The flow CLI on this machine is logged in (${b.cliConfig.path}).`
        : `  ${b.cliConfig.path} belongs to another server; it was left alone.`,
    );
    lines.push(`  From elsewhere:  flow login --url ${b.url} --token ${b.token}`);
    lines.push(`  or:              export FLOWSVC_URL=${b.url} FLOWSVC_TOKEN=${b.token}`);
    lines.push(`  (the token is also in ${b.dataDir}/admin.token)`);
  } else {
    lines.push("", `The admin token is in ${b.dataDir}/admin.token (flow login --url ${b.url} --token <token>).`);
  }
  lines.push("", "Try:  npx flow submit examples/hello.sh --follow", "Stop: Ctrl-C");
  console.log(lines.join("\n"));
};

export const printServerError = (message: string, hint?: string): void => {
  console.error(`error: ${message}`);
  if (hint) console.error(hint);
};
