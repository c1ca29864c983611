// The README's usage example; the e2e test runs exactly this in a browser.
import { createToolfsClient, ToolError } from "../src/index";

export async function usage(baseUrl: string, token: string, log: (text: string) => void): Promise<void> {
  const fs = createToolfsClient({ baseUrl, token, sessionId: "demo-1" });
  const read = await fs.read({ file_path: "notes.txt", limit: 50 });
  log(read.output); // line-numbered, exactly as a model sees it
  for await (const line of fs.readLines({ file_path: "notes.txt" })) log(line); // streamed
  const edit = await fs.edit({ file_path: "notes.txt", old_string: "draft", new_string: "final" });
  log(edit.output);
  for (const d of edit.metadata.diffs) log(`- ${d.oldText}\n+ ${d.newText}`);
  try {
    await fs.edit({ file_path: "todo.txt", old_string: "a", new_string: "b" }); // never read
  } catch (e) {
    if (!(e instanceof ToolError)) throw e;
    log(`${e.status} ${e.code} ${e.output}`);
  }
}
