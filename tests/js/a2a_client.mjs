// Drives a served workflow with the JavaScript A2A client (@a2a-js/sdk):
//   node a2a_client.mjs BASE_URL API_KEY
// where BASE_URL is an agent's URL (http://127.0.0.1:PORT/a2a/approval). Prints one JSON line
// of what it saw; the Python test (tests/server/test_a2a.py) checks it.
import { ClientFactory, ClientFactoryOptions } from "@a2a-js/sdk/client";
import { Role, TaskState } from "@a2a-js/sdk";

const [base, key] = process.argv.slice(2);

const text = (value) => ({ content: { $case: "text", value } });
const message = (value, ids = {}) => ({
  messageId: `js-${value}`,
  role: Role.ROLE_USER,
  parts: [text(value)],
  ...ids,
});
const options = { serviceParameters: key ? { "x-api-key": key } : {} };

async function main() {
  const seen = {};
  for (const transport of ["JSONRPC", "HTTP+JSON"]) {
    const factory = new ClientFactory(
      ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
        preferredTransports: [transport],
      }),
    );
    // the card of this agent: its full URL (a path of its own would replace the agent's path)
    const client = await factory.createFromUrl(`${base}/.well-known/agent-card.json`, "");
    const asked = await client.sendMessage({ message: message("Plan a team offsite") }, options);
    const answered = await client.sendMessage(
      { message: message("approve", { taskId: asked.id, contextId: asked.contextId }) },
      options,
    );
    const got = await client.getTask({ id: asked.id }, options);
    const events = [];
    for await (const event of client.sendMessageStream({ message: message("Plan a picnic") }, options)) {
      events.push(event.payload?.$case);
    }
    seen[transport] = {
      asked: TaskState[asked.status.state],
      prompt: asked.status.message?.parts?.[0]?.content?.value,
      answered: TaskState[answered.status.state],
      same_task: answered.id === asked.id,
      answer: got.artifacts?.[0]?.parts?.[0]?.content?.value,
      streamed: events,
    };
  }
  console.log(JSON.stringify(seen));
}

main().catch((err) => {
  console.error(String(err?.stack || err));
  process.exit(1);
});
