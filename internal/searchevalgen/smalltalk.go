package main

import "strings"

// openings and closings are the small talk around a session's stories:
// exchanges of a few turns, "A:" said by whoever opens the session, with
// {A} and {B} for the names. No question asks about them; they are the
// everyday turns a search has to look past.
var (
	openings = parseTalk(`
A: Hey {B}, got a minute? It's been a while.
B: Always for you. I just made tea, so talk away.
==
A: Morning! Did you sleep at all? You looked wrecked on Friday.
B: Ha, a bit better, thanks. Still running on coffee though.
==
A: Hi! Sorry I missed your call yesterday, my phone was on silent all afternoon.
B: No worries, nothing urgent. How are things?
==
A: There you are. How was the rest of your weekend?
B: Quiet, which was exactly what I needed. Yours?
A: Busy, but the good kind.
==
A: Hello hello. Is now a good time or are you in the middle of dinner?
B: Perfect timing, I just finished the dishes.
==
A: I've been meaning to message you all week!
B: Same here, it's been one of those weeks. What's new?
==
A: Good evening! How's the weather over there? It's pouring here.
B: Grey and windy, the usual. Let's pretend it's spring.
==
A: Hi {B}! Quick catch-up before my day gets crazy?
B: Sure, I've got about twenty minutes before I head out.
==
A: Hey, how did the week treat you?
B: Up and down, honestly. But I'm glad it's Friday.
==
A: Hiya. I saw your message this morning but couldn't answer until now.
B: That's fine, I figured you were swamped.
==
A: Long time no talk! I feel like a month went by.
B: It's only been a week, but I know what you mean.
==
A: Hi there. Are you still up? I can't sleep.
B: Wide awake too. What's on your mind?
==
A: Afternoon! I'm on my lunch break, so I thought I'd say hi.
B: Hi yourself! What are you eating?
A: Leftover soup, nothing exciting.
==
A: Finally a free evening. How are you doing, {B}?
B: Pretty well! I was just thinking about you actually.
==
A: Hey you. Did you get home all right the other night?
B: I did, the last bus was late but it came.
==
A: Happy Sunday! What are you up to today?
B: Laundry and pretending it's a hobby. You?
`)
	closings = parseTalk(`
A: Anyway, I should go. Talk soon!
B: Take care, speak later.
==
A: Okay, my battery is about to die. Bye for now!
==
B: I have to run, but this was lovely. Same time next week?
A: Definitely. Bye!
==
A: Right, back to the grind. Thanks for listening.
B: Any time. Good luck with everything.
==
B: Let's catch up again soon, okay?
A: Yes please. Goodnight!
==
A: I'm being called for dinner, gotta go.
B: Enjoy! Say hi from me.
==
A: Okay, I'll let you get some sleep. Night!
==
B: Sorry to cut this short, someone's at the door.
A: Go go! We'll talk later.
==
A: Thanks for the chat, it really helped.
B: Glad to hear it. Speak soon.
==
A: I need to get going before the shops close. Bye!
B: Bye, and don't forget your umbrella.
==
B: I'm falling asleep on my feet, let's continue another day.
A: Sure thing, rest well.
==
A: Okay, time for me to log off. Have a good one!
==
B: My break is over, back to work for me.
A: Hang in there. Chat soon!
==
A: That's all my news for now. Your turn next time!
B: Deal. Talk soon.
==
B: Got to go feed the neighbours' cat. Bye for now!
A: Ha, have fun. Bye!
==
A: Let me know how it all goes, okay?
B: Will do. Take care of yourself.
`)
)

// parseTalk reads exchanges separated by "==", each line "A: …" or "B: …".
func parseTalk(text string) [][]line {
	var out [][]line
	var cur []line
	for _, raw := range strings.Split(text, "\n") {
		l := strings.TrimSpace(raw)
		switch l {
		case "":
		case "==":
			out = append(out, cur)
			cur = nil
		default:
			cur = append(cur, line{who: int(l[0] - 'A'), text: strings.TrimSpace(l[2:])})
		}
	}
	return append(out, cur)
}

// smallTalk is exchange i of pool, wrapping around.
func smallTalk(pool [][]line, i int) []line {
	return pool[i%len(pool)]
}
