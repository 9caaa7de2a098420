--[[
Drops the line breaks inside a paragraph that sit between two East Asian wide characters.

Pandoc renders every line break inside a paragraph as a space, which in Japanese shows up in the
middle of a sentence. Pandoc's markdown extension east_asian_line_breaks removes exactly these
breaks, but Quarto does not hand reader extensions on to Pandoc (quarto-cli issue 8520), so the
Japanese profile runs this filter instead (`filters:` in _quarto-ja.yml), for the .qmd pages, which
may wrap Japanese text like any other. The notebooks do not: Jupyter shows such a break as a space,
so tools/bookcheck.py (check_japanese_line_breaks) flags the breaks this filter drops. One difference from Pandoc's extension: a break next to full-width
punctuation is dropped whatever the other side is (is_cjk_punct), so no space follows 「。」. tests/site/test_site_assets.py runs it through Pandoc when Pandoc is
installed.
]]

-- Wide characters as Pandoc's extension sees them: Hangul Jamo, CJK radicals to Yi, Hangul
-- syllables, CJK compatibility ideographs and forms, fullwidth forms, CJK extensions B and later.
local function is_wide(cp)
  return (cp >= 0x1100 and cp <= 0x115F) or (cp >= 0x2E80 and cp <= 0xA4CF)
      or (cp >= 0xAC00 and cp <= 0xD7A3) or (cp >= 0xF900 and cp <= 0xFAFF)
      or (cp >= 0xFE30 and cp <= 0xFE4F) or (cp >= 0xFF00 and cp <= 0xFF60)
      or (cp >= 0xFFE0 and cp <= 0xFFE6) or (cp >= 0x20000 and cp <= 0x3FFFD)
end

-- Full-width punctuation (「。」「、」「（」「」」「：」 ...): it carries its own spacing, so a line break
-- next to it is dropped even when the other side is Latin ("です。\nPress" -> "です。Press",
-- not "です。 Press"). Between a Japanese letter and a Latin one the space stays (the README's
-- typography: "を使います\nPress" keeps its space).
local function is_cjk_punct(cp)
  return (cp >= 0x3000 and cp <= 0x303F) or (cp >= 0xFF01 and cp <= 0xFF0F)
      or (cp >= 0xFF1A and cp <= 0xFF20) or (cp >= 0xFF3B and cp <= 0xFF40)
      or (cp >= 0xFF5B and cp <= 0xFF65)
end

local function first_codepoint(s)
  local ok, cp = pcall(utf8.codepoint, s, 1)
  return ok and cp or nil
end

local function last_codepoint(s)
  local start = utf8.offset(s, -1)
  if not start then return nil end
  local ok, cp = pcall(utf8.codepoint, s, start)
  return ok and cp or nil
end

function Inlines(inlines)
  for i = #inlines - 1, 2, -1 do
    if inlines[i].t == "SoftBreak" then
      local before = last_codepoint(pandoc.utils.stringify(inlines[i - 1]))
      local after = first_codepoint(pandoc.utils.stringify(inlines[i + 1]))
      if before and after and ((is_wide(before) and is_wide(after))
                               or is_cjk_punct(before) or is_cjk_punct(after)) then
        inlines:remove(i)
      end
    end
  end
  return inlines
end
