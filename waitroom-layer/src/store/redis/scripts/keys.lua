local KM, KS, KL, KD, KA, KC, KR, KP, KF, KN, KQ, KB, KT, KX = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13], KEYS[14]
-- The operator's front lane and the sessions moved there (scored by their old number).
local KFRONT, KMOVED = KEYS[15], KEYS[16]
-- The live line: the numbers held in `line` (a bitmap) and a version per block of them.
local KHELD, KBLK = KEYS[17], KEYS[18]
