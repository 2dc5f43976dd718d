-- Neovim's built-in LSP client as an independent client of `xdp2tc lsp` (tests/test_lsp.py).
-- Opens $XDP2TC_SOURCE, attaches a client started as $XDP2TC_PYTHON -m offload.cli lsp, waits
-- for its final diagnostics and writes them as JSON to $XDP2TC_OUT, then quits. Works on Neovim 0.7
-- (Debian 12): vim.lsp.start_client + buf_attach_client.
local source = os.getenv("XDP2TC_SOURCE")
local out = os.getenv("XDP2TC_OUT")
local root = vim.fn.fnamemodify(source, ":h")
vim.cmd("edit " .. vim.fn.fnameescape(source))
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start_client({
  name = "xdp2tc",
  cmd = { os.getenv("XDP2TC_PYTHON"), "-m", "offload.cli", "lsp" },
  root_dir = root,
  workspace_folders = { { uri = vim.uri_from_fname(root), name = "ws" } },
})
vim.lsp.buf_attach_client(buf, id)
-- the server publishes twice: what exploration settles (with a hint that N paths are
-- pending), then the final diagnostics; wait for those
local done = vim.wait(tonumber(os.getenv("XDP2TC_WAIT") or "120") * 1000, function()
  local diags = vim.diagnostic.get(buf)
  for _, d in ipairs(diags) do
    if d.message:find("pending", 1, true) then
      return false
    end
  end
  return #diags > 0
end, 100)
local rows = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local lsp = (d.user_data or {}).lsp or {}
  table.insert(rows, { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message,
                       source = d.source, code = lsp.code or d.code })
end
local f = io.open(out, "w")
f:write(vim.fn.json_encode({ done = done, diagnostics = rows }))
f:close()
vim.lsp.stop_client(id)
vim.cmd("qa!")
