// Drives the built OpenClaw plugin (integrations/openclaw/dist) against a real recall API, the
// way the gateway calls it: tools from the registered factory, hooks by name.
// argv[2]: path to dist/index.js; stdin: JSON {config, agentId, store: [{summary, detail}],
// recall: [query], prompts: [message], flush: [message], agentEnd: [message]}. Stdout: JSON of what came back.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const entry = (await import(pathToFileURL(process.argv[2]).href)).default;
const job = JSON.parse(readFileSync(0, "utf8"));

const logs = [];
const log = (level) => (message) => logs.push({ level, message: String(message) });
const hooks = new Map();
const factories = [];
entry.register({
  id: "totalrecall", pluginConfig: job.config,
  logger: { info: log("info"), warn: log("warn"), error: log("error"), debug: log("debug") },
  registerTool(factory, opts) { factories.push({ factory, opts }); },
  on(name, handler) { hooks.set(name, handler); },
  registerMemoryCapability() {},
});
const ctx = { agentId: job.agentId, sessionId: job.sessionId ?? "chaos-session" };
const tools = new Map();
for (const { factory } of factories) for (const t of factory(ctx)) tools.set(t.name, t);
const textOf = (r) => (r?.content ?? []).map((c) => c.text ?? "").join("\n");

const out = { stored: [], recalled: [], injected: [], flushed: [], logs };
for (const m of job.store ?? []) {
  out.stored.push(textOf(await tools.get("memory_store").execute("chaos", m)));
}
for (const query of job.recall ?? []) {
  out.recalled.push(textOf(await tools.get("memory_recall").execute("chaos",
    { query, timeframe: "all", maxResults: 10 })));
}
for (const prompt of job.prompts ?? []) {
  const res = await hooks.get("before_prompt_build")?.(
    { prompt, currentUserMessage: prompt, messages: [] }, ctx);
  out.injected.push(res ? (res.appendSystemContext ?? res.prependContext ?? "") : "");
}
if (job.flush?.length) {
  await hooks.get("before_compaction")?.(
    { messages: job.flush, messageCount: job.flush.length, sessionFile: "" }, ctx);
  out.flushed.push("before_compaction");
}
if (job.agentEnd?.length) {  // needs config.autoCapture
  await hooks.get("agent_end")?.({ messages: job.agentEnd, success: true }, ctx);
  out.flushed.push("agent_end");
}
process.stdout.write(JSON.stringify(out));
