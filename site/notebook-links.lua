--[[
Adds two links under the title of every chapter rendered from a notebook: download the notebook,
and open it in Google Colab.

Both are derived from the book's one repository address, `book.repo-url` (and `repo-branch`) in
_quarto.yml, and from the notebook's path in the project, so no URL is written anywhere else:

  download  <stem>.ipynb beside the page (tools/build_site.sh copies the notebooks there); the
            link carries data-noresolveinput, or Quarto would point it at the page's own .html
  Colab     https://colab.research.google.com/github/<owner>/<repo>/blob/<branch>/chapters/<lang>/<stem>.ipynb

A notebook opened in Colab installs attnbook from the same repository in its first code cell
(tools/colab_cell.py writes that cell from the same two settings). tests/site/test_site.py checks the
links on the rendered pages.
]]

local TEXT = {
  en = { download = "Download the notebook", colab = "Open in Colab",
         label = "Run this chapter" },
  ja = { download = "ノートブックをダウンロード", colab = "Colab で開く",
         label = "この章を動かす" },
}

-- "https://github.com/owner/repo(.git)(/)" -> "owner/repo", or nil for another host.
local function github_repo(url)
  local path = url:match("^https?://github%.com/([^/]+/[^/]+)")
  if path then path = path:gsub("%.git$", "") end
  return path
end

local function escape(s)
  return (s:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

-- Raw HTML, so that the download link can carry data-noresolveinput: Quarto rewrites links to the
-- project's inputs (our .ipynb chapters) into links to their rendered .html pages.
local function link(href, icon, text, attributes)
  return pandoc.RawInline("html", '<a class="notebook-link" href="' .. escape(href) .. '"'
    .. (attributes or "") .. '><i class="bi bi-' .. icon .. '" aria-hidden="true"></i> '
    .. escape(text) .. "</a>")
end

function Pandoc(doc)
  local input = quarto.doc.input_file
  if not quarto.doc.is_format("html") or not input:match("%.ipynb$") then return nil end
  local book = doc.meta.book or {}
  local url = book["repo-url"] and pandoc.utils.stringify(book["repo-url"])
  local repo = url and github_repo(url)
  if not repo then
    error("notebook-links.lua: book.repo-url in _quarto.yml must be a GitHub repository, got "
          .. tostring(url))
  end
  local branch = book["repo-branch"] and pandoc.utils.stringify(book["repo-branch"]) or "main"
  local project = quarto.project.directory
  local relative = input:sub(#project + 2)           -- chapters/<lang>/<stem>.ipynb
  local name = relative:match("([^/]+)$")
  local lang = doc.meta.lang and pandoc.utils.stringify(doc.meta.lang) or "en"
  local text = TEXT[lang] or TEXT.en

  local colab = "https://colab.research.google.com/github/" .. repo .. "/blob/" .. branch .. "/"
                .. relative
  local links = pandoc.Div({ pandoc.Plain({
      link(name, "download", text.download, ' download="' .. escape(name) .. '" data-noresolveinput'),
      pandoc.Space(),
      link(colab, "box-arrow-up-right", text.colab, ' target="_blank" rel="noopener"'),
    }) }, pandoc.Attr("", { "notebook-links" }, { role = "group", ["aria-label"] = text.label }))
  table.insert(doc.blocks, 1, links)
  return doc
end
