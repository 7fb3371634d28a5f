// LangGraph's JavaScript client (@langchain/langgraph-sdk), call by call, against a LangGraph
// server serving tests/server/langgraph_dev.py's project (graphs `chat` and `review`).
//
//   node langgraph_sdk_calls.mjs SERVER_URL [API_KEY]
//
// Prints one JSON line per call: {"call", "ok": true, "result"} with a summary of what the
// server answered (the fields LangGraph's server and ours mean alike; ids and timestamps are
// left to the caller to normalise), or {"call", "ok": false, "status", "error"}. A failed call
// never stops the rest. Run from the folder whose node_modules holds the SDK
// (tests/js/langgraph_sdk.sh installs it).
import { Client } from "@langchain/langgraph-sdk";

const [url, apiKey] = process.argv.slice(2);
if (!url) {
  console.error("usage: node langgraph_sdk_calls.mjs SERVER_URL [API_KEY]");
  process.exit(2);
}
const callerOptions = { maxRetries: 0 }; // a refusal is reported, not retried
const client = new Client({ apiUrl: url, apiKey: apiKey || null, callerOptions });

async function call(name, fn) {
  try {
    const result = await fn();
    console.log(JSON.stringify({ call: name, ok: true, result: result ?? null }));
  } catch (error) {
    const status = typeof error?.status === "number" ? error.status : null;
    console.log(
      JSON.stringify({ call: name, ok: false, status, error: String(error?.message ?? error) }),
    );
  }
}

/** The HTTP status a call fails with (200 when it does not). */
async function statusOf(promise) {
  try {
    await promise;
    return 200;
  } catch (error) {
    if (typeof error?.status === "number") return error.status;
    throw error;
  }
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const user = (text, delay = 0) => ({ messages: [{ role: "user", content: text }], delay });
const said = (values) => (values?.messages ?? []).map((m) => [m.type, m.content]);
const OWN = new Set(["graph_id", "assistant_id", "test", "team", "tag", "v"]);
/** The metadata a client set, and which graph and assistant ran (each server adds its own). */
const meta = (m) => Object.fromEntries(Object.entries(m ?? {}).filter(([k]) => OWN.has(k)));
const pick = (o, keys) => Object.fromEntries(keys.map((k) => [k, o?.[k] ?? null]));
const assistant = (a) => ({
  ...pick(a, ["assistant_id", "graph_id", "config", "version", "name", "description"]),
  metadata: meta(a.metadata),
});
const thread = (t) => ({
  ...pick(t, ["thread_id", "status", "values"]),
  metadata: meta(t.metadata),
  interrupts: t.interrupts ?? {},
});
const state = (s) => ({
  values: s.values,
  next: s.next,
  step: s.metadata?.step,
  source: s.metadata?.source,
  checkpoint_id: s.checkpoint?.checkpoint_id,
  parent_checkpoint_id: s.parent_checkpoint?.checkpoint_id ?? null,
  tasks: s.tasks.map((t) => ({ name: t.name, interrupts: t.interrupts, error: t.error })),
});
const run = (r) =>
  pick(r, ["run_id", "thread_id", "assistant_id", "status", "multitask_strategy"]);
const cron = (c) => ({
  ...pick(c, ["cron_id", "assistant_id", "thread_id", "schedule", "end_time", "enabled"]),
  metadata: meta(c.metadata),
});
const item = (i) => pick(i, ["namespace", "key", "value"]);
/** A stream's parts: event names, each chunk's type and text, a value's messages. */
function shown(part) {
  if (part.event === "metadata") return [part.event, Object.keys(part.data).sort()];
  if (part.event === "messages") {
    const [chunk, info] = part.data;
    return [part.event, chunk.type, chunk.content, info.langgraph_node];
  }
  if (part.event === "values") return [part.event, said(part.data)];
  if (part.event === "events") return [part.event, part.data.event, part.data.name];
  return [part.event, part.data];
}
async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(shown(part));
  return parts;
}

/** Until run `runId` is in its node (`running`, `reply` next). */
async function going(tid, runId) {
  for (let i = 0; i < 400; i++) {
    const [got, now] = await Promise.all([client.runs.get(tid, runId), client.threads.getState(tid)]);
    if (got.status === "running" && now.next?.[0] === "reply") return;
    await sleep(50);
  }
  throw new Error(`run ${runId} did not start its node`);
}

const marker = crypto.randomUUID();
const threadId = async (metadata) => (await client.threads.create({ metadata })).thread_id;

// -- the API key ---------------------------------------------------------------------------------

await call("auth.withoutKey", async () => {
  const keyless = new Client({ apiUrl: url, apiKey: null, callerOptions });
  const wrong = new Client({ apiUrl: url, apiKey: "not-the-key", callerOptions });
  return {
    without: await statusOf(keyless.assistants.search({ limit: 1 })),
    wrong: await statusOf(wrong.threads.create()),
  };
});

// -- assistants ----------------------------------------------------------------------------------

let chat = "chat"; // the system assistant's id, found by assistants.search
let mine;
await call("assistants.search", async () => {
  const found = await client.assistants.search({ graphId: "chat", metadata: { created_by: "system" } });
  chat = found[0].assistant_id;
  return found.map(assistant);
});
await call("assistants.search includePagination", async () => {
  const page = await client.assistants.search({ limit: 1, includePagination: true });
  return { assistants: page.assistants.length, next: page.next };
});
await call("assistants.get", async () => assistant(await client.assistants.get(chat)));
await call("assistants.getGraph", async () => {
  const drawn = await client.assistants.getGraph(chat);
  return {
    nodes: drawn.nodes.map((n) => n.id).sort(),
    edges: drawn.edges.map((e) => [e.source, e.target]).sort(),
  };
});
await call("assistants.getSchemas", async () => {
  const schemas = await client.assistants.getSchemas(chat);
  return {
    schemas: Object.keys(schemas).filter((k) => schemas[k] != null).sort(),
    state: Object.keys(schemas.state_schema.properties).sort(),
  };
});
await call("assistants.getSubgraphs", async () => client.assistants.getSubgraphs(chat));
await call("assistants.create", async () => {
  const made = await client.assistants.create({
    graphId: "chat",
    config: { configurable: { tone: "dry" } },
    metadata: { test: marker },
    name: "mine",
  });
  mine = made.assistant_id;
  return assistant(made);
});
await call("assistants.update", async () =>
  assistant(await client.assistants.update(mine, { metadata: { test: marker, v: 2 } })),
);
await call("assistants.getVersions", async () =>
  (await client.assistants.getVersions(mine)).map(assistant),
);
await call("assistants.setLatest", async () =>
  assistant(await client.assistants.setLatest(mine, 1)),
);
await call("assistants.count", async () =>
  client.assistants.count({ metadata: { test: marker } }),
);
await call("runs.wait with a created assistant", async () =>
  said(await client.runs.wait(null, mine, { input: user("via mine") })),
);
await call("assistants.delete", async () => {
  await client.assistants.delete(mine);
  return { gone: await statusOf(client.assistants.get(mine)) };
});

// -- threads -------------------------------------------------------------------------------------

let tid, copied;
await call("threads.create", async () => {
  const made = await client.threads.create({ metadata: { test: marker, team: "a" } });
  tid = made.thread_id;
  return thread(made);
});
await call("threads.get", async () => thread(await client.threads.get(tid)));
await call("threads.update", async () =>
  thread(await client.threads.update(tid, { metadata: { tag: "x" } })),
);
await call("threads.search", async () =>
  (await client.threads.search({ metadata: { test: marker, tag: "x" } })).map(thread),
);
await call("threads.count", async () => client.threads.count({ metadata: { test: marker } }));
await call("runs.wait", async () => said(await client.runs.wait(tid, chat, { input: user("hello") })));
await call("threads.copy", async () => {
  const copy = await client.threads.copy(tid);
  copied = copy.thread_id;
  const got = await client.threads.get(copied);
  const again = await client.runs.wait(copied, chat, { input: user("only in the copy") });
  return {
    copy: thread(copy),
    got: thread(got),
    copy_said: said(again),
    original_said: said((await client.threads.getState(tid)).values),
  };
});
await call("threads.getState", async () => state(await client.threads.getState(tid)));
await call("threads.updateState", async () => {
  const edit = { messages: [{ role: "assistant", content: "edited answer" }] };
  const written = await client.threads.updateState(tid, { values: edit, asNode: "reply" });
  const edited = await client.threads.getState(tid);
  const again = await client.runs.wait(tid, chat, { input: user("two") });
  return {
    edited: state(edited),
    same_checkpoint: written.checkpoint.checkpoint_id === edited.checkpoint.checkpoint_id,
    again: said(again),
  };
});
await call("threads.getHistory", async () =>
  (await client.threads.getHistory(tid, { limit: 3 })).map(state),
);
await call("threads.getHistory before", async () => {
  const [, second] = await client.threads.getHistory(tid, { limit: 2 });
  const before = { configurable: { checkpoint_id: second.checkpoint.checkpoint_id } };
  return (await client.threads.getHistory(tid, { limit: 2, before })).map(state);
});
await call("threads.getState checkpoint", async () => {
  const [, second] = await client.threads.getHistory(tid, { limit: 2 });
  const id = second.checkpoint.checkpoint_id;
  return {
    by_id: state(await client.threads.getState(tid, id)),
    by_checkpoint: state(await client.threads.getState(tid, { checkpoint_id: id })),
  };
});
await call("threads.patchState", async () => {
  await client.threads.patchState(tid, { tag: "patched" });
  return { metadata: meta((await client.threads.get(tid)).metadata) };
});
await call("threads.delete", async () => {
  await client.threads.delete(copied);
  return { gone: await statusOf(client.threads.get(copied)) };
});
await call("threads.prune", async () => {
  const pruned = [await threadId({ test: marker }), await threadId({ test: marker })];
  const answer = await client.threads.prune([...pruned, crypto.randomUUID()]);
  return { answer, left: await Promise.all(pruned.map((t) => statusOf(client.threads.get(t)))) };
});

// -- runs ----------------------------------------------------------------------------------------

let created, runs;
await call("runs.create", async () => {
  runs = await threadId();
  created = await client.runs.create(runs, chat, {
    input: user("one", 0.3),
    streamMode: ["values", "updates"],
  });
  // A created run: LangGraph's server queues it for a worker ('pending'); ours starts it at
  // once on an idle thread ('running'). Either is a run not yet done.
  return { ...run(created), status: ["pending", "running"].includes(created.status) };
});
await call("runs.joinStream", async () => collect(client.runs.joinStream(runs, created.run_id)));
await call("runs.join", async () => said(await client.runs.join(runs, created.run_id)));
await call("runs.stream values/updates/messages-tuple", async () =>
  collect(
    client.runs.stream(runs, chat, {
      input: user("stream me"),
      streamMode: ["values", "updates", "messages-tuple"],
    }),
  ),
);
await call("runs.stream events", async () => {
  const parts = await collect(client.runs.stream(runs, chat, { input: user("hi"), streamMode: "events" }));
  return parts.filter((p) => p[0] !== "events" || p[1].startsWith("on_chat_model_"));
});
await call("runs.stream checkpoints/tasks/debug/custom", async () => {
  const names = {};
  for (const mode of ["checkpoints", "tasks", "debug", "custom"]) {
    const stream = client.runs.stream(runs, chat, { input: user(mode), streamMode: mode });
    names[mode] = (await collect(stream)).map((p) => p[0]);
  }
  return names;
});
await call("threads.joinStream", async () => {
  // The thread's stream, open while a run goes on it, until that run is done.
  const stop = new AbortController();
  const told = [];
  const followed = (async () => {
    try {
      for await (const part of client.threads.joinStream(runs, {
        streamMode: ["run_modes", "lifecycle"],
        signal: stop.signal,
      })) {
        told.push(part.event === "values" ? ["values", said(part.data)] : [part.event]);
        if (part.event === "metadata" && part.data.status === "run_done") return;
      }
    } catch (error) {
      if (!stop.signal.aborted) throw error;
    }
  })();
  await sleep(500); // the stream open before the run starts
  await client.runs.wait(runs, chat, { input: user("on the thread's stream") });
  await Promise.race([followed, sleep(5000)]);
  stop.abort();
  await followed;
  return told;
});
await call("runs.list", async () => (await client.runs.list(runs)).map(run));
await call("runs.get", async () => run(await client.runs.get(runs, created.run_id)));
await call("runs.cancel", async () => {
  const slow = await client.runs.create(runs, chat, { input: user("slow", 5) });
  await going(runs, slow.run_id);
  await client.runs.cancel(runs, slow.run_id, true);
  return {
    run: run(await client.runs.get(runs, slow.run_id)),
    thread: (await client.threads.get(runs)).status,
  };
});
await call("runs.cancelMany", async () => {
  const slow = await client.runs.create(runs, chat, { input: user("slow again", 5) });
  await going(runs, slow.run_id);
  await client.runs.cancelMany({ threadId: runs, runIds: [slow.run_id], action: "interrupt" });
  await client.runs.join(runs, slow.run_id);
  return run(await client.runs.get(runs, slow.run_id));
});
await call("runs.delete", async () => {
  const last = (await client.runs.list(runs, { limit: 1 }))[0];
  await client.runs.delete(runs, last.run_id);
  const listed = (await client.runs.list(runs, { limit: 100 })).map((r) => r.run_id);
  return {
    gone: await statusOf(client.runs.get(runs, last.run_id)),
    listed: listed.includes(last.run_id),
  };
});
await call("runs.createBatch", async () => {
  const made = await client.runs.createBatch([
    { assistantId: chat, input: user("batch one") },
    { assistantId: chat, input: user("batch two") },
  ]);
  return made.map((r) => ({ ...run(r), status: null }));
});
for (const onCompletion of ["keep", "delete"]) {
  await call(`runs.wait stateless onCompletion=${onCompletion}`, async () => {
    let created;
    const done = await client.runs.wait(null, chat, {
      input: user("no thread"),
      onCompletion,
      onRunCreated: (meta) => (created = meta),
    });
    return { said: said(done), thread: await statusOf(client.threads.get(created.thread_id)) };
  });
  await call(`runs.stream stateless onCompletion=${onCompletion}`, async () => {
    // The stream's answer names its run only (Content-Location /runs/RUN), not its thread.
    let created, runId;
    const parts = [];
    for await (const part of client.runs.stream(null, chat, {
      input: user("streamed, no thread"),
      streamMode: "values",
      onCompletion,
      onRunCreated: (meta) => (created = meta),
    })) {
      if (part.event === "metadata") runId = part.data.run_id;
      parts.push(shown(part));
    }
    return { parts, created: created?.run_id === runId, thread_id: created?.thread_id ?? null };
  });
}

// The four multitask strategies, each on a thread of its own, side by side in time.
await Promise.all(
  ["enqueue", "reject", "interrupt", "rollback"].map((strategy) =>
    call(`runs.create multitaskStrategy=${strategy}`, async () => {
      const busy = await threadId();
      const first = await client.runs.create(busy, chat, { input: user("first", 1.5) });
      await going(busy, first.run_id);
      let second;
      try {
        second = await client.runs.create(busy, chat, {
          input: user("second"),
          multitaskStrategy: strategy,
        });
        await client.runs.join(busy, second.run_id);
      } catch (error) {
        second = { refused: error.status };
        await client.runs.join(busy, first.run_id);
      }
      return {
        first: await client.runs.get(busy, first.run_id).then(
          (r) => r.status,
          (error) => error.status,
        ),
        second: second.refused ?? second.multitask_strategy,
        said: said((await client.threads.getState(busy)).values),
        runs: (await client.runs.list(busy)).length,
      };
    }),
  ),
);

await call("runs.wait interruptBefore", async () => {
  const stop = await threadId();
  const stopped = await client.runs.wait(stop, chat, { input: user("one"), interruptBefore: ["reply"] });
  const waiting = await client.threads.getState(stop);
  const status = (await client.threads.get(stop)).status;
  const continued = await client.runs.wait(stop, chat, { input: null });
  return { stopped: said(stopped), next: waiting.next, status, continued: said(continued) };
});

await call("runs.wait human step, command resume", async () => {
  const asked = await threadId();
  const first = await client.runs.wait(asked, "review", { input: user("the plan") });
  const waiting = await client.threads.get(asked);
  const answered = await client.runs.wait(asked, "review", { command: { resume: "yes" } });
  return {
    asked: first.__interrupt__?.map((i) => i.value),
    status: waiting.status,
    interrupts: Object.values(waiting.interrupts ?? {}).flat().map((i) => i.value),
    verdict: answered.verdict,
    said: said(answered),
    after: (await client.threads.get(asked)).status,
  };
});

await call("runs.stream human step, command resume", async () => {
  const asked = await threadId();
  const first = await collect(
    client.runs.stream(asked, "review", { input: user("the plan"), streamMode: "updates" }),
  );
  const answered = await collect(
    client.runs.stream(asked, "review", { command: { resume: "no" }, streamMode: "updates" }),
  );
  return { first, answered };
});

// -- crons ---------------------------------------------------------------------------------------

let threadCron, cronId, cronThread;
await call("crons.createForThread", async () => {
  cronThread = await threadId();
  const made = await client.crons.createForThread(cronThread, chat, {
    schedule: "0 0 1 1 *",
    input: user("yearly"),
  });
  threadCron = made.cron_id;
  return { keys: Object.keys(made).sort(), ...pick(made, ["thread_id", "schedule"]) };
});
await call("crons.create", async () => {
  const made = await client.crons.create(chat, {
    schedule: "0 0 1 1 *",
    input: user("yearly, no thread"),
    metadata: { test: marker },
  });
  cronId = made.cron_id;
  return { keys: Object.keys(made).sort(), ...pick(made, ["schedule"]) };
});
await call("crons.update", async () =>
  cron(await client.crons.update(cronId, { schedule: "0 0 2 1 *" })),
);
await call("crons.search", async () =>
  (await client.crons.search({ assistantId: chat, metadata: { test: marker } })).map(cron),
);
await call("crons.search threadId", async () =>
  (await client.crons.search({ threadId: cronThread })).map(cron),
);
await call("crons.count", async () =>
  client.crons.count({ assistantId: chat, metadata: { test: marker } }),
);
await call("crons.delete", async () => {
  await client.crons.delete(cronId);
  await client.crons.delete(threadCron);
  return {
    left: await client.crons.count({ assistantId: chat, metadata: { test: marker } }),
    for_thread: (await client.crons.search({ threadId: cronThread })).length,
  };
});

// -- store ---------------------------------------------------------------------------------------

await call("store.putItem", async () => {
  await client.store.putItem(["docs", marker], "a", { kind: "note", n: 1 });
  await client.store.putItem(["docs", marker, "deep"], "b", { kind: "todo", n: 2 });
  return null;
});
await call("store.getItem", async () => item(await client.store.getItem(["docs", marker], "a")));
await call("store.searchItems", async () =>
  (await client.store.searchItems(["docs", marker], { filter: { kind: "todo" } })).items.map(item),
);
await call("store.listNamespaces", async () =>
  client.store.listNamespaces({ prefix: ["docs", marker] }),
);
await call("store.deleteItem", async () => {
  await client.store.deleteItem(["docs", marker], "a");
  return { gone: await statusOf(client.store.getItem(["docs", marker], "a")) };
});
