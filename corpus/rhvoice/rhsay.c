/* rhsay: many sentences through RHVoice in one process, one WAV file each.
 *
 * RHVoice reaches harken only as a Windows DLL (PyPI's rhvoice-wrapper-bin) run under wine,
 * and starting wine costs more than a sentence, so one process reads a batch from stdin:
 *
 *     rhsay.exe DATA_DIR VOICE < lines      each line: OUT.wav TAB RATE TAB PITCH TAB TEXT
 *
 * RATE and PITCH are multipliers of the voice's own (1 = unchanged), passed to RHVoice as
 * relative_rate and relative_pitch. A line that fails is reported on stderr as
 * "item N: reason" (N counts lines from 0) and the batch goes on. Exit status: 0 when every
 * line rendered, 1 when some failed, 2 when nothing could start (usage, DLL, engine).
 * Build: x86_64-w64-mingw32-gcc -O2 -o rhsay.exe rhsay.c (RHVoice.dll beside rhsay.exe).
 */
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

/* The RHVoice 1.14 C API (RHVoice.h), declared here since the wheel carries no headers. */
typedef struct {
  int (*set_sample_rate)(int rate, void *user);
  int (*play_speech)(const short *samples, unsigned int count, void *user);
  int (*process_mark)(const char *name, void *user);
  int (*word_starts)(unsigned int pos, unsigned int len, void *user);
  int (*word_ends)(unsigned int pos, unsigned int len, void *user);
  int (*sentence_starts)(unsigned int pos, unsigned int len, void *user);
  int (*sentence_ends)(unsigned int pos, unsigned int len, void *user);
  int (*play_audio)(const char *src, void *user);
  void (*done)(void *user);
} rh_callbacks;

typedef struct {
  const char *data_path, *config_path;
  const char **resource_paths;
  rh_callbacks callbacks;
  unsigned int options;
} rh_init_params;

typedef struct {
  const char *voice_profile;
  double absolute_rate, absolute_pitch, absolute_volume; /* -1..1 around the voice's default */
  double relative_rate, relative_pitch, relative_volume; /* multipliers, 1 = unchanged */
  int punctuation_mode;                                  /* 0: the synthesiser decides */
  const char *punctuation_list;
  int capitals_mode;
  int flags;
} rh_synth_params;

typedef void *(*new_engine_fn)(const rh_init_params *);
typedef void (*delete_engine_fn)(void *);
typedef void *(*new_message_fn)(void *, const char *, unsigned int, int, const rh_synth_params *,
                                void *);
typedef void (*delete_message_fn)(void *);
typedef int (*speak_fn)(void *);

/* One sentence's audio, collected by the callbacks. */
typedef struct {
  int rate;
  short *samples;
  size_t count, capacity;
} audio_buf;

static int on_sample_rate(int rate, void *user) {
  ((audio_buf *)user)->rate = rate;
  return 1;
}

static int on_speech(const short *samples, unsigned int count, void *user) {
  audio_buf *a = user;
  if (a->count + count > a->capacity) {
    size_t want = 2 * (a->count + count);
    short *grown = realloc(a->samples, want * sizeof(short));
    if (!grown) return 0; /* stops this sentence; reported as no audio */
    a->samples = grown;
    a->capacity = want;
  }
  memcpy(a->samples + a->count, samples, count * sizeof(short));
  a->count += count;
  return 1;
}

static void put_u32(unsigned char *p, unsigned long v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A 16-bit mono PCM WAV; returns 0 or an errno. */
static int write_wav(const char *path, const audio_buf *a) {
  unsigned char h[44] = "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\0\0\0\0\0\0\0\0\x02\0\x10\0data";
  unsigned long bytes = (unsigned long)(a->count * 2);
  put_u32(h + 4, 36 + bytes);
  put_u32(h + 24, (unsigned long)a->rate);
  put_u32(h + 28, (unsigned long)a->rate * 2);
  put_u32(h + 40, bytes);
  FILE *f = fopen(path, "wb");
  if (!f) return errno;
  int ok = fwrite(h, 1, 44, f) == 44 && fwrite(a->samples, 2, a->count, f) == a->count;
  ok = (fclose(f) == 0) && ok;
  return ok ? 0 : (errno ? errno : EIO);
}

/* Splits "OUT\tRATE\tPITCH\tTEXT" in place; returns 0 when the line is malformed. */
static int parse(char *line, char **out, double *rate, double *pitch, char **text) {
  char *field[4];
  field[0] = line;
  for (int i = 1; i < 4; i++) {
    char *tab = strchr(field[i - 1], '\t');
    if (!tab) return 0;
    *tab = '\0';
    field[i] = tab + 1;
  }
  char *end1, *end2;
  *rate = strtod(field[1], &end1);
  *pitch = strtod(field[2], &end2);
  *out = field[0];
  *text = field[3];
  return *end1 == '\0' && *end2 == '\0' && *rate > 0 && *pitch > 0 && **out && **text;
}

typedef struct {
  void *engine;
  const char *voice;
  new_message_fn new_message;
  delete_message_fn delete_message;
  speak_fn speak;
} synth;

/* Renders one line; returns NULL or why it failed. */
static const char *render(const synth *s, char *line, audio_buf *a) {
  static char why[256];
  char *out, *text;
  double rate, pitch;
  if (!parse(line, &out, &rate, &pitch, &text)) return "malformed line (OUT\\tRATE\\tPITCH\\tTEXT)";
  rh_synth_params p;
  memset(&p, 0, sizeof p);
  p.voice_profile = s->voice;
  p.relative_rate = rate;
  p.relative_pitch = pitch;
  p.relative_volume = 1.0;
  a->count = 0;
  a->rate = 0;
  void *msg = s->new_message(s->engine, text, (unsigned int)strlen(text), 0, &p, a);
  if (!msg) return "RHVoice refused the message (unknown voice?)";
  int spoke = s->speak(msg);
  s->delete_message(msg);
  if (!spoke || a->count == 0 || a->rate <= 0) return "RHVoice produced no audio";
  int err = write_wav(out, a);
  if (err) {
    snprintf(why, sizeof why, "cannot write %s: %s", out, strerror(err));
    return why;
  }
  return NULL;
}

typedef void (*any_fn)(void); /* casts through it are what C allows between function types */

static any_fn need(HMODULE dll, const char *name) {
  FARPROC f = GetProcAddress(dll, name);
  if (!f) fprintf(stderr, "rhsay: RHVoice.dll lacks %s\n", name);
  return (any_fn)f;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: rhsay DATA_DIR VOICE < lines of OUT.wav\\tRATE\\tPITCH\\tTEXT\n");
    return 2;
  }
  HMODULE dll = LoadLibraryA("RHVoice.dll");
  if (!dll) {
    fprintf(stderr, "rhsay: cannot load RHVoice.dll (error %lu)\n", GetLastError());
    return 2;
  }
  new_engine_fn new_engine = (new_engine_fn)need(dll, "RHVoice_new_tts_engine");
  delete_engine_fn delete_engine = (delete_engine_fn)need(dll, "RHVoice_delete_tts_engine");
  synth s = {NULL, argv[2], (new_message_fn)need(dll, "RHVoice_new_message"),
             (delete_message_fn)need(dll, "RHVoice_delete_message"),
             (speak_fn)need(dll, "RHVoice_speak")};
  if (!new_engine || !delete_engine || !s.new_message || !s.delete_message || !s.speak) return 2;
  rh_init_params init;
  memset(&init, 0, sizeof init);
  init.data_path = init.config_path = argv[1];
  init.callbacks.set_sample_rate = on_sample_rate;
  init.callbacks.play_speech = on_speech;
  s.engine = new_engine(&init);
  if (!s.engine) {
    fprintf(stderr, "rhsay: RHVoice could not start with data in %s\n", argv[1]);
    return 2;
  }
  _setmode(_fileno(stdin), _O_BINARY);
  static char line[1 << 16];
  audio_buf audio = {0, NULL, 0, 0};
  int failed = 0;
  for (long item = 0; fgets(line, sizeof line, stdin); item++) {
    size_t len = strlen(line);
    const char *why = NULL;
    if (len == sizeof line - 1 && line[len - 1] != '\n') {
      int c;
      while ((c = getchar()) != EOF && c != '\n') continue; /* skip the rest of it */
      why = "line longer than 64 KiB";
    } else {
      while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
      why = render(&s, line, &audio);
    }
    if (why) {
      fprintf(stderr, "item %ld: %s\n", item, why);
      failed = 1;
    }
  }
  free(audio.samples);
  delete_engine(s.engine);
  return failed;
}
