// The xdp2tc extension: starts `xdp2tc lsp` (stdio) from the configured interpreter or venv
// and hands it the settings. Everything shown comes from the server; the two client-side
// commands only copy what the server returns (the tc script) or open it (the CFG's SVG).
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions } from "vscode-languageclient/node";

let client: LanguageClient | undefined;

/** The command that starts the server: `<python> -m offload.cli lsp` for a configured
 * interpreter or venv, the workspace's .venv when there is one, else `xdp2tc lsp` on PATH. */
export function serverCommand(setting: string, workspace: string | undefined): { command: string; args: string[] } {
  const fromVenv = (dir: string): string | undefined => {
    const py = path.join(dir, "bin", "python");
    return fs.existsSync(py) ? py : undefined;
  };
  let python: string | undefined;
  if (setting) {
    python = fs.existsSync(setting) && fs.statSync(setting).isDirectory() ? fromVenv(setting) : setting;
  } else if (workspace) {
    python = fromVenv(path.join(workspace, ".venv"));
  }
  return python ? { command: python, args: ["-m", "offload.cli", "lsp"] } : { command: "xdp2tc", args: ["lsp"] };
}

function settings(): Record<string, unknown> {
  const c = vscode.workspace.getConfiguration("xdp2tc");
  return {
    target: c.get<string>("target", ""),
    assume: c.get<string[]>("assume", []),
    mapsFrom: c.get<string>("mapsFrom", ""),
    codeLens: c.get<boolean>("codeLens", true),
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const workspace = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const { command, args } = serverCommand(vscode.workspace.getConfiguration("xdp2tc").get<string>("python", ""), workspace);
  const serverOptions: ServerOptions = { command, args, options: { cwd: workspace } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "c" }],
    initializationOptions: settings(),
    synchronize: {
      // a rebuilt object (make, a build system) re-analyses the sources bound to it
      fileEvents: [
        vscode.workspace.createFileSystemWatcher("**/*.o"),
        vscode.workspace.createFileSystemWatcher("**/.xdp2tc.toml"),
        vscode.workspace.createFileSystemWatcher("**/compile_commands.json"),
      ],
    },
  };
  client = new LanguageClient("xdp2tc", "xdp2tc", serverOptions, clientOptions);
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("xdp2tc") && client) {
        await client.sendNotification("workspace/didChangeConfiguration", { settings: { xdp2tc: settings() } });
      }
    }),
    vscode.commands.registerCommand("xdp2tc.copyRules", async (uri?: string) => {
      const text = await askServer("xdp2tc.rules", uri);
      if (typeof text === "string") {
        await vscode.env.clipboard.writeText(text);
        void vscode.window.showInformationMessage("xdp2tc: tc rules copied to the clipboard");
      }
    }),
    vscode.commands.registerCommand("xdp2tc.showCfg", async (uri?: string) => {
      const text = await askServer("xdp2tc.cfg", uri);
      if (typeof text !== "string") {
        return;
      }
      const file = path.join(os.tmpdir(), `xdp2tc-cfg-${Date.now()}.svg`);
      fs.writeFileSync(file, text);
      await vscode.commands.executeCommand("vscode.open", vscode.Uri.file(file));
    }),
  );
  await client.start();
}

/** Ask the server for a document of one source (workspace/executeCommand): the URI a code
 * action names, else the active editor's. */
async function askServer(name: string, uri?: string): Promise<unknown> {
  const target = uri ?? vscode.window.activeTextEditor?.document.uri.toString();
  if (!client || !target) {
    return undefined;
  }
  return client.sendRequest("workspace/executeCommand", { command: name, arguments: [target] });
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
