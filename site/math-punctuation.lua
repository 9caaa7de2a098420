--[[
Keeps an inline formula on the same line as the punctuation that follows it.

A browser may break the line right after a typeset formula (MathJax draws it as a box), so a line
could start with 「。」「、」「）」 or with "." and ",". This filter wraps the formula together with the
punctuation that directly follows it in <span class="math-nobr">, which site/book.css keeps unbroken
(white-space: nowrap). Run for both editions (_quarto.yml: filters).
]]

-- Punctuation that must never start a line: Japanese (full-width) and ASCII.
local CLOSING = {
  ["。"] = true, ["、"] = true, ["）"] = true, ["」"] = true, ["』"] = true, ["】"] = true,
  ["〕"] = true, ["，"] = true, ["．"] = true, ["・"] = true, ["："] = true, ["；"] = true,
  ["？"] = true, ["ー"] = true, ["…"] = true,
  ["."] = true, [","] = true, [")"] = true, [";"] = true, [":"] = true, ["?"] = true, ["!"] = true,
}

-- The leading run of closing punctuation of s, and the rest.
local function split_closing(s)
  local n = 0
  for pos, cp in utf8.codes(s) do
    if not CLOSING[utf8.char(cp)] then
      return s:sub(1, pos - 1), s:sub(pos)
    end
  end
  return s, ""
end

function Inlines(inlines)
  local i = 1
  while i < #inlines do
    local a, b = inlines[i], inlines[i + 1]
    if a.t == "Math" and a.mathtype == "InlineMath" and b.t == "Str" then
      local punct, rest = split_closing(b.text)
      if punct ~= "" then
        inlines[i] = pandoc.Span({a, pandoc.Str(punct)}, {class = "math-nobr"})
        if rest == "" then inlines:remove(i + 1) else inlines[i + 1] = pandoc.Str(rest) end
      end
    end
    i = i + 1
  end
  return inlines
end
