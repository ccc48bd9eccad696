# cmake -DIN=file -DOUT=file.c -DSYM=name -P embed.cmake : a file as a const char[] with a NUL.
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," arr "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" arr "${arr}")
file(WRITE "${OUT}" "/* generated from ${IN} */\nconst char ${SYM}[] = {\n${arr}0x00};\n")
