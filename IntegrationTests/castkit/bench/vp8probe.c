// vp8probe: libvpx (castd's VP8 settings) and x264 (castd's H.264 settings) on the bench
// painter's busy field, outside castd: bytes, CPU, luma PSNR and quantizer a frame, to try
// libvpx knobs castd's VP8Encoder.Tuning does not have (sharpness, undershoot/overshoot,
// buffer sizes) and the field's wraps. The docs/encoding.md "VP8 speed" figures marked "C probe".
// Not built by SwiftPM; the conversion is a plain BT.601 one, close to castd's.
//
//   cc -O2 -o /tmp/vp8probe IntegrationTests/castkit/bench/vp8probe.c -lvpx -lx264 -lm
//   FRAMES=120 SPEED=-10 [STEPS=1,2] [WRAP=0 MARGIN=1500] [SCM= STATIC= SHARP= ER= PART= UNDER= OVER=
//     BUF= BUFI= BUFO= KBPS= W= H= GREY=1 V=1 KFWRAP=1] /tmp/vp8probe vp8|x264
//
// STEPS: painter steps of (9, 5) between encoded frames, cycled; WRAP=0: no wrap (MARGIN
// must hold the scroll); V=1: one line a frame (and "wrap" before a frame where the field wraps);
// KFWRAP=1: libvpx codes each wrap frame as a key frame (VPX_EFLAG_FORCE_KF), as if the sender
// knew where the wraps are. x264's PSNR is not computed (0).
//
// IN=frames.yuv: encode raw I420 frames of W×H from that file instead of the field (all of
// them, or FRAMES); FPS: the frame rate the pts step and the summary's rate use (default 30);
// OUT=clip.ivf: libvpx's frames in an IVF file, for a decoder to compare (vp8_tuning.py).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <math.h>
#include <time.h>
#include <vpx/vpx_encoder.h>
#include <vpx/vp8cx.h>
#include <x264.h>

static int W=1920,H=1080,M=512;
static uint32_t *field; static int FW,FH;
static void make_field(int grey){
  FW=W+M; FH=H+M; int bw=FW/8+1,bh=FH/8+1; uint32_t *blocks=malloc(4*bw*bh); uint32_t r=0x12345678;
  for(int i=0;i<bw*bh;i++){ r^=r<<13; r^=r>>17; r^=r<<5; blocks[i]=r&0xffffff; if(grey){uint32_t g=blocks[i]&0xff; blocks[i]=g|(g<<8)|(g<<16);} }
  field=malloc(4L*FW*FH);
  for(int y=0;y<FH;y++)for(int x=0;x<FW;x++) field[(long)y*FW+x]=blocks[(y/8)*bw+x/8];
}
static int sdx=9,sdy=5,wrap=1;
static void frame_yuv(int n, uint8_t*Y,uint8_t*U,uint8_t*V){
  int dx=(n*sdx)%M, dy=(n*sdy)%M;
  if(!wrap){ dx = (n*sdx); dy=(n*sdy); if(dx>=M||dy>=M){ fprintf(stderr,"nowrap: too many frames\n"); exit(1);} }
  for(int y=0;y<H;y++){ uint32_t*row=field+(long)(y+dy)*FW+dx;
    for(int x=0;x<W;x++){ uint32_t p=row[x]; int R=(p>>16)&255,G=(p>>8)&255,B=p&255;
      Y[y*W+x]=(uint8_t)((66*R+129*G+25*B+128)>>8)+16; } }
  for(int y=0;y<H/2;y++)for(int x=0;x<W/2;x++){ int R=0,G=0,B=0;
    for(int j=0;j<2;j++)for(int i=0;i<2;i++){ uint32_t p=field[(long)(2*y+j+dy)*FW+2*x+i+dx]; R+=(p>>16)&255;G+=(p>>8)&255;B+=p&255; }
    R=(R+2)/4;G=(G+2)/4;B=(B+2)/4;
    U[y*W/2+x]=(uint8_t)(((-38*R-74*G+112*B+128)>>8)+128); V[y*W/2+x]=(uint8_t)(((112*R-94*G-18*B+128)>>8)+128); }
}
static int stepk(int n){ const char*s=getenv("STEPS"); if(!s) return n; int v[64],c=0; char b[256]; strncpy(b,s,255); b[255]=0; for(char*t=strtok(b,",");t&&c<64;t=strtok(NULL,",")) v[c++]=atoi(t); int k=0; for(int i=0;i<n;i++) k+=v[i%c]; return k; }
static double cpu_ms(void){ struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t); return t.tv_sec*1e3+t.tv_nsec/1e6; }
static double getd(const char*k,double d){ const char*v=getenv(k); return v?atof(v):d; }

int main(int argc,char**argv){
  int frames=(int)getd("FRAMES",60); M=(int)getd("MARGIN",512); W=(int)getd("W",1920); H=(int)getd("H",1080); int grey=(int)getd("GREY",0); sdx=(int)getd("DX",9); sdy=(int)getd("DY",5); wrap=(int)getd("WRAP",1);
  int kbps=(int)getd("KBPS",4000);
  int fps=(int)getd("FPS",30); const char*in_path=getenv("IN"); FILE*in=NULL;
  long ysz=(long)W*H, csz=ysz/4; uint8_t*buf=malloc(ysz+2*csz);
  if(in_path){ in=fopen(in_path,"rb"); if(!in){perror(in_path);return 1;} fseek(in,0,SEEK_END); long have=ftell(in)/(ysz+2*csz); rewind(in);
    if(!getenv("FRAMES")||have<frames) frames=(int)have;
    if(frames<2){fprintf(stderr,"%s: under two frames\n",in_path);return 1;} }
  else make_field(grey);
  FILE*out=getenv("OUT")?fopen(getenv("OUT"),"wb"):NULL;
  if(getenv("OUT")&&!out){perror(getenv("OUT"));return 1;}
  if(out){ uint8_t h[32]={'D','K','I','F',0,0,32,0,'V','P','8','0'}; h[12]=W&255;h[13]=W>>8;h[14]=H&255;h[15]=H>>8;
    h[16]=fps&255;h[17]=(fps>>8)&255;h[20]=1; h[24]=frames&255;h[25]=(frames>>8)&255; fwrite(h,1,32,out); }
  const char*codec=argc>1?argv[1]:"vp8";
  double tot_bytes=0, tot_cpu=0, tot_psnr=0, tot_q=0, tot_p1=0; int cnt=0, dropped=0; double maxb=0;
  if(!strcmp(codec,"vp8")){
    vpx_codec_enc_cfg_t c; vpx_codec_enc_config_default(vpx_codec_vp8_cx(),&c,0);
    c.g_w=W;c.g_h=H;c.g_threads=1;c.g_timebase.num=1;c.g_timebase.den=90000;c.g_pass=VPX_RC_ONE_PASS;c.g_lag_in_frames=0;
    c.g_error_resilient=(int)getd("ER",1)?VPX_ERROR_RESILIENT_DEFAULT:0; c.rc_end_usage=(int)getd("CQ",0)?VPX_CQ:VPX_CBR; c.rc_resize_allowed=0;
    c.rc_dropframe_thresh=(int)getd("DROP",0); c.rc_min_quantizer=(int)getd("MINQ",2); c.rc_max_quantizer=(int)getd("MAXQ",63);
    c.rc_undershoot_pct=(int)getd("UNDER",100); c.rc_overshoot_pct=(int)getd("OVER",15); c.rc_buf_initial_sz=(int)getd("BUFI",500); c.rc_buf_optimal_sz=(int)getd("BUFO",600); c.rc_buf_sz=(int)getd("BUF",1000);
    c.kf_mode=VPX_KF_DISABLED; c.rc_target_bitrate=kbps;
    vpx_codec_ctx_t ctx; if(vpx_codec_enc_init(&ctx,vpx_codec_vp8_cx(),&c,VPX_CODEC_USE_PSNR)){fprintf(stderr,"init\n");return 1;}
    vpx_codec_control(&ctx,VP8E_SET_CPUUSED,(int)getd("SPEED",-12));
    vpx_codec_control(&ctx,VP8E_SET_SCREEN_CONTENT_MODE,(int)getd("SCM",1));
    vpx_codec_control(&ctx,VP8E_SET_NOISE_SENSITIVITY,0);
    vpx_codec_control(&ctx,VP8E_SET_STATIC_THRESHOLD,(int)getd("STATIC",1));
    vpx_codec_control(&ctx,VP8E_SET_TOKEN_PARTITIONS,(int)getd("PART",0));
    vpx_codec_control(&ctx,VP8E_SET_MAX_INTRA_BITRATE_PCT,(int)getd("MAXINTRA",300));
    vpx_codec_control(&ctx,VP8E_SET_SHARPNESS,(int)getd("SHARP",0));
    if(getenv("CQLEVEL")) vpx_codec_control(&ctx,VP8E_SET_CQ_LEVEL,(int)getd("CQLEVEL",10));
    if(getenv("GFBOOST")) vpx_codec_control(&ctx,VP8E_SET_GF_CBR_BOOST_PCT,(int)getd("GFBOOST",0));
    vpx_image_t img; vpx_img_wrap(&img,VPX_IMG_FMT_I420,W,H,1,buf);
    int verbose=(int)getd("V",0);
    for(int n=0;n<frames;n++){
      if(in){ if(fread(buf,1,ysz+2*csz,in)!=(size_t)(ysz+2*csz)){fprintf(stderr,"short read\n");return 1;} }
      else frame_yuv(stepk(n),buf,buf+ysz,buf+ysz+csz);
      double t0=cpu_ms();
      int k0=stepk(n), k1=n?stepk(n-1):0;
      int wrapped=n>0&&(((k0*sdx)%M)<((k1*sdx)%M)||((k0*sdy)%M)<((k1*sdy)%M));
      if(verbose&&wrapped) printf("  wrap\n");
      vpx_enc_frame_flags_t fl=(getd("KFWRAP",0)&&wrapped)?VPX_EFLAG_FORCE_KF:0;
      if(in) fl=0;
      if(vpx_codec_encode(&ctx,&img,(vpx_codec_pts_t)n*(90000/fps),90000/fps,fl,(unsigned long)getd("DL",1))){fprintf(stderr,"enc %s\n",vpx_codec_error_detail(&ctx));return 1;}
      double t1=cpu_ms(); double bytes=0,ps=0,p1=0; int key=0;
      const vpx_codec_cx_pkt_t*p; vpx_codec_iter_t it=NULL;
      while((p=vpx_codec_get_cx_data(&ctx,&it))){ if(p->kind==VPX_CODEC_CX_FRAME_PKT){ bytes+=p->data.frame.sz; key=!!(p->data.frame.flags&VPX_FRAME_IS_KEY);
          if(out){ uint32_t sz=(uint32_t)p->data.frame.sz; uint64_t pts=(uint64_t)n; uint8_t fh[12];
            for(int i=0;i<4;i++) fh[i]=(sz>>(8*i))&255;
            for(int i=0;i<8;i++) fh[4+i]=(pts>>(8*i))&255;
            fwrite(fh,1,12,out); fwrite(p->data.frame.buf,1,sz,out); }
          const uint8_t*b=p->data.frame.buf; uint32_t tag=b[0]|(b[1]<<8)|(b[2]<<16); p1=(tag>>5)&0x7FFFF; }
        else if(p->kind==VPX_CODEC_PSNR_PKT) ps=p->data.psnr.psnr[0]; }
      int q=0; vpx_codec_control(&ctx,VP8E_GET_LAST_QUANTIZER_64,&q);
      if(verbose) printf("  f%d key=%d bytes=%.0f p1=%.0f psnr=%.2f q=%d cpu=%.1f\n",n,key,bytes,p1,ps,q,t1-t0);
      if(bytes==0) dropped++;
      if(n>0){ tot_bytes+=bytes; tot_cpu+=t1-t0; tot_psnr+=ps; tot_q+=q; tot_p1+=p1; cnt++; if(bytes>maxb)maxb=bytes; }
    }
    vpx_codec_destroy(&ctx);
    if(out&&fclose(out)){perror("OUT");return 1;}
  } else {
    x264_param_t p; x264_param_default_preset(&p,getenv("PRESET")?getenv("PRESET"):"superfast","zerolatency");
    p.i_log_level=X264_LOG_NONE; p.i_csp=X264_CSP_I420; p.i_width=W;p.i_height=H;p.i_fps_num=30;p.i_fps_den=1;p.i_timebase_num=1;p.i_timebase_den=30;p.b_vfr_input=0;
    p.i_bframe=0;p.rc.i_lookahead=0;p.i_sync_lookahead=0;p.b_sliced_threads=1;p.i_threads=1;p.i_slice_count=1;p.i_keyint_max=X264_KEYINT_MAX_INFINITE;p.i_scenecut_threshold=0;
    p.rc.i_rc_method=X264_RC_ABR;p.rc.i_bitrate=kbps;p.rc.i_vbv_max_bitrate=kbps;p.rc.i_vbv_buffer_size=kbps/30; p.analyse.b_psnr=1;
    x264_param_apply_profile(&p,"baseline");
    x264_t*h=x264_encoder_open(&p); x264_picture_t pin,pout; x264_picture_init(&pin); pin.img.i_csp=X264_CSP_I420; pin.img.i_plane=3;
    pin.img.plane[0]=buf;pin.img.plane[1]=buf+ysz;pin.img.plane[2]=buf+ysz+csz;pin.img.i_stride[0]=W;pin.img.i_stride[1]=pin.img.i_stride[2]=W/2;
    int verbose=(int)getd("V",0);
    for(int n=0;n<frames;n++){ frame_yuv(stepk(n),buf,buf+ysz,buf+ysz+csz); pin.i_pts=n; x264_nal_t*nal;int nn; double t0=cpu_ms();
      int sz=x264_encoder_encode(h,&nal,&nn,&pin,&pout); double t1=cpu_ms();
      if(verbose) printf("  f%d bytes=%d psnr=%.2f qp=%d\n",n,sz,pout.prop.f_psnr[0],pout.i_qpplus1-1);
      if(n>0){tot_bytes+=sz;tot_cpu+=t1-t0;tot_psnr+=pout.prop.f_psnr[0];tot_q+=pout.i_qpplus1-1;cnt++; if(sz>maxb)maxb=sz;} }
    x264_encoder_close(h);
  }
  printf("%s bytes/frame=%.0f kbps=%.0f cpu_ms=%.1f psnrY=%.2f q=%.1f p1=%.0f max=%.0f dropped=%d\n",codec,tot_bytes/cnt,tot_bytes/cnt*8*fps/1000,tot_cpu/cnt,tot_psnr/cnt,tot_q/cnt,tot_p1/cnt,maxb,dropped);
  return 0;
}
